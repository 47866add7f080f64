"""`common.text.without_password`: the secret of a URL a user typed never reaches a message."""

import pytest

from llm_affinity.common.text import without_password


@pytest.mark.parametrize(
    "url, shown",
    [
        ("http://alice:s3cret@host:8000/v1", "http://alice:***@host:8000/v1"),
        ("https://:tok@host/metrics", "https://:***@host/metrics"),
        ("http://al:s3cret@[::1/v1", "http://al:***@[::1/v1"),  # malformed elsewhere: still hidden
        ("http://alice@host/v1", "http://alice@host/v1"),  # a user name alone is no secret
        ("http://host/v1?next=a:b@c", "http://host/v1?next=a:b@c"),  # '@' in the query is not userinfo
        ("http://host:8000/v1", "http://host:8000/v1"),
        ("not a url", "not a url"),
    ],
)
def test_without_password(url, shown):
    assert without_password(url) == shown
