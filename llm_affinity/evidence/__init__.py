"""Evidence that affinity happens: observe it (`probe`, `sli`) and predict it (`simulate`,
`recommend`). Never imports aws_cdk; heavy libraries (duckdb, httpx, matplotlib) load lazily in
the command that needs them, so the CLI keeps its fast start."""
