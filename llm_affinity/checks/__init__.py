"""One rule set, three front doors: templates (`lint`), live accounts (`audit`) and `cdk synth`.

Nothing in this package imports aws_cdk or boto3 at import time: the lint CLI must start fast.
"""
