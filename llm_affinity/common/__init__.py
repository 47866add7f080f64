"""Code every door shares: the serving definitions (lint, audit, the synth gate and the
constructs), the untrusted-file reader (lint and the evidence commands), text escaping for
anything that came from an input, and the command plumbing of the CLI (usage errors, exit
codes, output). Pure standard library: importing it costs the CLI nothing."""
