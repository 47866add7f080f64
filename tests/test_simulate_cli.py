"""`llm-affinity simulate` as a user runs it: the contract's flags, the workload file, bad input
(one line, exit 2), text and JSON output, the chart, and the calibration loop."""

from __future__ import annotations

import json

import pytest
from conftest import run_cli

from llm_affinity.cli import main
from llm_affinity.evidence.report import Record, build_report
from llm_affinity.evidence.simulate import POLICIES, Workload, run_policy
from llm_affinity.evidence.simulate.calibrate import CalibrationError, calibrate_file

SMALL = ["--sessions", "30", "--turns", "4"]
ALL = list(POLICIES)


def sim(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["simulate", *args])
    out, err = capsys.readouterr()
    return code, out, err


def sim_json(capsys, *args: str) -> dict:
    code, out, err = sim(capsys, *args, "--format", "json")
    assert code == 0, err
    return json.loads(out)


def test_every_contract_flag_is_accepted_and_lands_in_the_workload(capsys, tmp_path):
    wl_file = tmp_path / "w.yaml"
    wl_file.write_text("instances: 2\nsessions: 9\nturns: 3\nengine: sglang\n")
    data = sim_json(
        capsys,
        "--instances",
        "3",
        "--policies",
        "round_robin,lb_cookie",
        "--sessions",
        "12",
        "--turns",
        "2-5",
        "--system-tokens",
        "100",
        "--turn-tokens",
        "50",
        "--output-tokens",
        "20",
        "--think-time",
        "2.5",
        "--kv-capacity",
        "0",
        "--arrival-rate",
        "0.7",
        "--nat-addresses",
        "2",
        "--ip-churn",
        "0.2",
        "--cookie-duration",
        "30",
        "--clients-behind-nat",
        "0.5",
        "--hot-share",
        "0",
        "--fail-at",
        "5",
        "--scale-in-at",
        "8",
        "--seed",
        "4",
        "--workload",
        str(wl_file),
    )
    wl = data["workload"]
    assert (wl["instances"], wl["sessions"], wl["turns"], wl["system_tokens"], wl["turn_tokens"]) == (
        3,
        12,
        "2-5",
        100,
        50,
    )
    assert (wl["output_tokens"], wl["think_time_s"], wl["kv_capacity_tokens"], wl["arrival_rate"]) == (20, 2.5, 0, 0.7)
    assert (wl["nat_addresses"], wl["ip_churn"], wl["cookie_duration_s"], wl["clients_behind_nat"]) == (
        2,
        0.2,
        30.0,
        0.5,
    )
    assert (wl["fail_at_s"], wl["scale_in_at_s"], wl["seed"], wl["engine"]) == ([5.0], [8.0], 4, "sglang")
    assert list(data["policies"]) == ["round_robin", "lb_cookie"]


def test_flag_help_states_the_workload_defaults():
    from llm_affinity.evidence.cli_simulate import FLAGS, HELPS
    from llm_affinity.evidence.simulate.workload import resolve

    defaults = Workload()
    resolved = resolve(defaults)
    for flag, key in FLAGS.items():
        stated = HELPS[flag].split("(default: ")[1].rstrip(")")
        if stated.startswith("from "):
            assert getattr(defaults, key) is None and getattr(resolved, key) is not None, flag
            if stated.endswith(", 32768"):
                assert getattr(resolved, key) == 32768, flag
        elif isinstance(getattr(defaults, key), str):
            assert stated == getattr(defaults, key), flag
        else:
            assert float(stated) == float(getattr(defaults, key)), flag


def test_identical_seeds_give_byte_identical_json_through_the_cli():
    args = ["simulate", "--format", "json", "--sessions", "40", "--turns", "3-6", "--ip-churn", "0.2", "--seed", "5"]
    first, second = run_cli(*args), run_cli(*args)
    assert first.returncode == 0 and first.stdout == second.stdout and first.stderr == ""


def test_text_table_has_a_row_per_policy_and_fits_100_columns(capsys):
    code, out, _ = sim(capsys, "--sessions", "30", "--turns", "25")
    assert code == 0
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 100
    head = next(line for line in lines if line.startswith("policy"))
    assert head.split() == ["policy", "hit", "stable", "moves", "imbal", "tok/s", "TTFT", "p50", "TTFT", "p95"]
    rows = [line.split()[0] for line in lines[lines.index(head) + 1 :] if line and not line.startswith(" ")][:9]
    assert rows == ALL
    for label in ("hit rate per turn", "TTFT p95 per turn", "columns: rr = round_robin"):
        assert any(line.startswith(label) for line in lines), label
    assert "(5 of 25 turns not shown; --wide or --format json has all)" in out


def test_a_value_wider_than_its_column_keeps_a_space_before_it(capsys):
    # A TTFT of 100,000 s or more is 9 characters, the width of the TTFT columns: it ran into
    # the cell before it ("37101,424 s101,424 s").
    code, out, _ = sim(capsys, "--sessions", "5", "--policies", "lb_cookie", "--ttft-overhead-ms", "1e9")
    assert code == 0
    row = next(line for line in out.splitlines() if line.startswith("lb_cookie"))
    assert row.split()[-4:] == ["101,424", "s", "101,424", "s"]  # the histogram's top bucket (docs)
    assert len(row.split()) == 10


def test_wide_table_shows_every_turn_and_column_and_the_intervals(capsys):
    code, out, _ = sim(capsys, *SMALL, "--turns", "25", "--seeds", "3", "--wide", "--policies", "lb_cookie,round_robin")
    assert code == 0
    assert "TTFT p50 per turn" in out and "not shown" not in out
    head = next(line for line in out.splitlines() if line.startswith("policy"))
    assert head.split()[-2:] == ["instances", "requests"]
    assert sum(1 for line in out.splitlines() if line.strip().startswith("±")) == 2
    assert "3 seeds (0-2)" in out


def test_chart_is_written(capsys, tmp_path):
    png = tmp_path / "sim.png"
    code, _, err = sim(capsys, *SMALL, "--policies", "round_robin,lb_cookie", "--chart", str(png))
    assert code == 0, err
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    "yaml_text,needle",
    [
        ("sessions: 10\nsesions: 5\n", "unknown key 'sesions'"),
        ("sessions: ten\n", "sessions must be an integer >= 1, got 'ten'"),
        ("sessions: true\n", "sessions must be an integer >= 1, got True"),
        ("ip_churn: 1.5\n", "ip_churn must be a number from 0 to 1, got 1.5"),
        ("turns: 7-3\n", "turns must be an integer from 1 to 10,000 or 'MIN-MAX'"),
        ("turns: 5-10001\n", "turns must be an integer from 1 to 10,000 or 'MIN-MAX'"),
        ("protocol: udp\n", "protocol must be http or tcp, got 'udp'"),
        ("mcp_tools: yes please\n", "mcp_tools must be true or false"),
        ("regions: 2\n", "regions is not modelled: the simulator models one region"),
        ("instance_type: g9.xlarge\n", "instance_type must be g5.xlarge or g6.xlarge"),
        ("- a\n- b\n", "must be a mapping"),
        ("sessions: [1\n", "not valid YAML"),
        # nesting: PyYAML's scanner is quadratic in open brackets (this took minutes) and its
        # composer recurses per level (a RecursionError): refused from the token stream
        ("[" * 100_000 + "]" * 100_000, "nested more than 16 levels deep at line 1"),
        ("{a: " * 50_000 + "1" + "}" * 50_000, "nested more than 16 levels deep at line 1"),
        ("- " * 100_000 + "1\n", "nested more than 16 levels deep at line 1"),
        ("instances: 100000000\n", "instances must be an integer from 1 to 10,000, got 100000000"),
        ("instances: 3\nsessions: 9\ninstances: 4\n", "key 'instances' is given twice (again at line 3)"),
        ("{instances: 3, 'instances': 4}\n", "key 'instances' is given twice (again at line 1)"),
    ],
)
def test_bad_workload_file_is_one_line_and_exit_2(capsys, tmp_path, yaml_text, needle):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml_text)
    code, out, err = sim(capsys, "--workload", str(path))
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1
    assert needle in err and str(path) in err


@pytest.mark.parametrize(
    "args,needle",
    [
        (["--sessions", "0"], "--sessions: sessions must be an integer >= 1, got 0"),
        (["--ip-churn", "much"], "--ip-churn: ip_churn must be a number from 0 to 1"),
        (["--turns", "2.5"], "--turns: turns must be"),
        (["--cookie-duration", "604801"], "--cookie-duration: cookie_duration_s must be a number from 1 to 604800"),
        (["--fail-at", "10,-1"], "--fail-at: fail_at_s must be a list of numbers >= 0"),
        (["--policies", "round_robin,sticky"], "--policies: no policy 'sticky'"),
        (["--workload", "/nonexistent/w.yaml"], "workload /nonexistent/w.yaml:"),
        (["--calibrate", "/nonexistent/r.json"], "--calibrate /nonexistent/r.json:"),
        # runs that would never end: refused, never a hang
        (["--instances", "99999999999999999999"], "--instances: instances must be an integer from 1 to 10,000"),
        (["--instance-churn", "1e300"], "instance_churn_per_hour must be a number from 0 to 3600, got 1e+300"),
        (["--think-time", "1e300", "--sessions", "2"], "the simulated clock passed 1,000,000,000 s"),
        (["--arrival-rate", "1e-300", "--sessions", "2"], "the simulated clock passed 1,000,000,000 s"),
        (["--prefill-tokens-per-s", "1e-300", "--sessions", "2"], "the simulated clock passed 1,000,000,000 s"),
        (["--decode-tokens-per-s", "1e-300", "--sessions", "2"], "the simulated clock passed 1,000,000,000 s"),
        # turns that add no tokens never reach the context window: a billion requests
        (["--turns", "1000000000", "--turn-tokens", "0", "--output-tokens", "0"], "--turns: turns must be an integer"),
        (["--hot-turns-multiplier", "100000000"], "hot_turns_multiplier must be an integer from 1 to 100"),
        # one instance replaced every second, each answer 13.5 s of decode: no request ever completes
        (["--instances", "1", "--instance-churn", "3600", "--policies", "lb_cookie"], "lost its request to 100"),
    ],
)
def test_bad_flags_are_one_line_and_exit_2(capsys, args, needle):
    code, out, err = sim(capsys, *args)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and needle in err


def test_chart_into_a_missing_folder_is_exit_2(capsys, tmp_path):
    code, _, err = sim(capsys, *SMALL, "--chart", str(tmp_path / "no" / "x.png"))
    assert code == 2 and "--chart" in err


# --- calibration: probe a small fleet, fit the rates, simulate -----------------------------------


def _measured_report(tmp_path, wl: Workload, policy: str = "lb_cookie") -> str:
    """Stand-in for `probe` on a real fleet: the records of a run with rates the test knows."""
    records = []

    def tap(ts, sid, turn, inst, prompt, cached, ttft_ms):
        records.append(
            Record(
                ts=ts,
                session=f"s{sid}",
                turn=turn,
                instance=f"i{inst}",
                prompt_tokens=prompt,
                cached_tokens=cached,
                ttft_ms=ttft_ms,
            )
        )

    run_policy(wl, policy, tap=tap)
    path = tmp_path / "report.json"
    path.write_text(json.dumps(build_report(records, "probe")))
    return str(path)


def test_calibration_recovers_rates_and_shape_and_the_simulated_ttft_matches_per_turn(capsys, tmp_path):
    # Round robin on two instances, one session at a time (as `probe --concurrency 1` runs): the
    # uncached tokens differ from turn to turn (a session's previous prefix is on the other
    # instance), so the rate and the fixed overhead can be told apart, and every turn's requests
    # compute the same (the fit pairs a turn's mean uncached tokens with its median TTFT);
    # decode is fast so the TTFT has no queueing in it.
    fleet = Workload(
        instances=2,
        sessions=40,
        turns=6,
        concurrency=1,
        prefill_tokens_per_s=1800.0,
        ttft_overhead_ms=35.0,
        decode_tokens_per_s=1000.0,
        seed=2,
    )
    report_path = _measured_report(tmp_path, fleet, "round_robin")
    cal = calibrate_file(report_path)
    # (the fleet's first cold requests still pull turn 2's mean a little: 1,250 against 1,200)
    assert cal.prefill_tokens_per_s == pytest.approx(1800.0, rel=0.03)
    assert cal.ttft_overhead_ms == pytest.approx(35.0, abs=10.0)
    assert cal.decode_tokens_per_s is None and cal.points == 6
    assert {k: cal.shape[k] for k in ("sessions", "turns", "system_tokens", "turn_tokens", "output_tokens")} == {
        "sessions": 40,
        "turns": 6,
        "system_tokens": 2000,
        "turn_tokens": 500,
        "output_tokens": 200,
    }
    # a probe report does not say how many sessions ran at once: probe's default, all of them
    assert cal.shape["concurrency"] == 40 and cal.shape["think_time_s"] == 0.0

    data = sim_json(
        capsys,
        "--calibrate",
        report_path,
        "--instances",
        "2",
        "--concurrency",
        "1",
        "--think-time",
        "10",
        "--decode-tokens-per-s",
        "1000",
        "--seed",
        "2",
        "--policies",
        "round_robin",
    )
    wl = data["workload"]
    assert wl["calibration"]["prefill_tokens_per_s"] == cal.prefill_tokens_per_s
    assert (wl["sessions"], wl["turns"], wl["system_tokens"], wl["turn_tokens"]) == (40, 6, 2000, 500)
    assert wl["calibration"]["shape"]["concurrency"]["from"].startswith("probe's default")
    measured = json.loads(open(report_path).read())["per_turn"]
    simulated = data["policies"]["round_robin"]["per_turn"]
    for m, s in zip(measured, simulated, strict=True):
        assert s["ttft_p50_ms"] == pytest.approx(m["ttft_p50_ms"], rel=0.05), m["turn"]


def test_calibration_from_vllm_metrics(tmp_path):
    path = tmp_path / "metrics.txt"
    path.write_text(
        "# HELP vllm:prompt_tokens_total Prompt tokens.\n"
        'vllm:prompt_tokens_total{model_name="m"} 120000\n'
        'vllm:prefix_cache_hits_total{model_name="m"} 90000\n'
        'vllm:request_prefill_time_seconds_sum{model_name="m"} 12.0\n'
        'vllm:request_prefill_time_seconds_count{model_name="m"} 60\n'
        'vllm:time_per_output_token_seconds_sum{model_name="m"} 20.0\n'
        'vllm:time_per_output_token_seconds_count{model_name="m"} 500\n'
    )
    cal = calibrate_file(str(path))
    assert cal.prefill_tokens_per_s == 2500.0 and cal.decode_tokens_per_s == 25.0


@pytest.mark.parametrize(
    "content,needle",
    [
        ('{"per_turn": []}', "no turn has requests"),
        ('{"sessions": 3}', "no per_turn list"),
        (
            '{"per_turn": [{"requests": 2, "prompt_tokens": 100, "cached_tokens": 0, "ttft_p50_ms": 0}]}',
            "does not grow",
        ),
        ("{not json", "not valid JSON"),
        ("hello", "neither a probe/sli report"),
        ("vllm:num_requests_running 1\n", "needs vllm:prompt_tokens_total"),
    ],
)
def test_unusable_calibration_input_is_one_clear_error(tmp_path, content, needle):
    path = tmp_path / "in.txt"
    path.write_text(content)
    with pytest.raises(CalibrationError, match=needle):
        calibrate_file(str(path))


def test_calibrate_and_an_explicit_prefill_rate_conflict(capsys, tmp_path):
    path = tmp_path / "r.json"
    path.write_text('{"per_turn": [{"requests": 1, "prompt_tokens": 3000, "cached_tokens": 0, "ttft_p50_ms": 1000}]}')
    code, _, err = sim(capsys, "--calibrate", str(path), "--prefill-tokens-per-s", "100")
    assert code == 2 and "give one or the other" in err
