"""The LMCache version matrix: which image, LMCache, vLLM and connector the fleet's KV sharing
runs, in one place, with the source of every entry (docs/lmcache.md shows the same table).

Why pinned and written down: vLLM reaches LMCache through a connector name registered in vLLM
(`LMCacheConnectorV1`, in-tree since vLLM 0.8.5) that imports the `lmcache` package, which
vLLM does not depend on; the two must be built against the same torch. LMCache's own release
image (`lmcache/vllm-openai:<LMCache tag>`) installs both in one image, which is what its
compatibility page recommends ("built as one runtime stack"), so the fleet pins that image's
tag and the launch command its docs show. Pure data (no aws_cdk import): the constructs build
from it and `simulate`/`recommend` model the same store, so the numbers they print are those of
what `LmCache()` deploys.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MatrixRow:
    """One combination of image, LMCache, vLLM and connector, and where each fact comes from."""

    image: str
    lmcache: str
    vllm: str
    connector: str
    entrypoint: str
    source: str


#: The pinned row: what `LmCache()` runs unless `image=` says otherwise.
PINNED = MatrixRow(
    image="lmcache/vllm-openai:v0.5.6",
    lmcache="0.5.6 (latest on PyPI when checked; wheel built 2026-10-15, commit g3e11e108)",
    vllm=(
        "not pinned by the image build (`uv pip install vllm[runai,tensorizer]` then `lmcache`): the vLLM that "
        "was latest on PyPI when the image was built, probably 0.31.0 - UNVERIFIED, read it with "
        "`docker run --rm --entrypoint /opt/venv/bin/pip lmcache/vllm-openai:v0.5.6 show vllm lmcache`"
    ),
    connector="LMCacheConnectorV1 (vLLM factory.py registers it since 0.8.5; still registered in 0.33.0)",
    entrypoint='ENTRYPOINT ["/opt/venv/bin/vllm", "serve"]: container arguments start with the model',
    source=(
        "LMCache .github/workflows/publish.yml @049f1036 (image tags lmcache/vllm-openai:${LATEST_TAG}, built "
        "FROM nvcr.io/nvidia/cuda-dl-base:25.09-cuda13.0-devel-ubuntu24.04, so the host driver must support "
        "CUDA 13.0); docker/Dockerfile @ab6cf272 (stage image-release, ENTRYPOINT); PyPI lmcache 0.5.6 and "
        "vllm 0.8.4/0.8.5/0.33.0 wheels; LMCache docs/source/production/docker_deployment.rst @55a01c0d "
        "(launch command)"
    ),
)

#: Older, documented combinations (LMCache's installation_compatibility CSVs), for readers
#: pinning another image: (vLLM, LMCache, connector, source).
HISTORY = (
    ("<=0.8.4", "V0 only", "LMCacheConnector (V0)", "vllm 0.8.4 wheel listing"),
    ("0.8.5-0.10.1", "0.3.2, 0.3.3, 0.3.5", "LMCacheConnectorV1", "installation_compatibility.csv @073157a7"),
    ("0.10.2", "0.3.4, 0.3.6, 0.3.7, 0.3.9", "LMCacheConnectorV1", "installation_compatibility.csv @073157a7"),
    ("0.11.x", "0.3.9", "LMCacheConnectorV1", "installation_compatibility.csv @073157a7"),
    ("0.10.2-0.16.0", "0.3.10-0.4.1", "LMCacheConnectorV1", "Installation_compatibility_matrix.csv @fafc2861"),
    ("0.17.0-0.18.0", "0.4.2", "LMCacheConnectorV1", "Installation_compatibility_matrix.csv @fafc2861"),
)

#: The connector and role written into `--kv-transfer-config` (LMCache's docker and Redis
#: backend docs show exactly this JSON).
CONNECTOR = "LMCacheConnectorV1"
KV_ROLE = "kv_both"
#: Where the image keeps LMCache's multiprocess Prometheus files (LMCache's default,
#: observability.py); vLLM and LMCache must share it for LMCache's metrics to reach /metrics.
PROMETHEUS_MULTIPROC_DIR = "/tmp/lmcache_prometheus"

#: The shared store `LmCache()` deploys by default (ElastiCache for Valkey, one node type for the
#: primary and its replica), and so the store `simulate --shared-kv` models unless told otherwise.
#: Size it for bandwidth, not only memory: docs/lmcache.md and docs/simulate.md show why.
STORE_NODE_TYPE_DEFAULT = "cache.r7g.xlarge"
