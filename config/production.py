"""Which stacks are production: those the policy pack treats so (`policy/policy-config.json`,
`productionStacks`). Standard library only: the workflows' stack lists (`synth.stack_files`) read it without
the project's packages, and the program reads it to hold production stacks to more (alerts must reach
someone).
"""

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
POLICY_CONFIG = Path("policy") / "policy-config.json"
PRODUCTION_RULE = "karpenter-no-latest-ami-in-production"


def production_stacks(root: Path = ROOT) -> list[str]:
    """Stack names the policy pack (and the deploy workflow's approval gate) treat as production."""
    config = json.loads((root / POLICY_CONFIG).read_text())
    return list(config[PRODUCTION_RULE]["productionStacks"])
