"""Facts read from the installed SDKs and the Karpenter reference are what the program relies on."""

import ast
import csv
from pathlib import Path

import pulumi_aws

from facts.aws_provider import provider_config_keys
from facts.instance_types import (
    ALL_INSTANCE_TYPES_TSV,
    INSTANCE_TYPES_TSV,
    _rows,
    ec2_instance_type_names,
    gpu_instance_types,
    instance_types,
)
from facts.regions import regions


def test_aws_provider_keys_are_every_config_variable_of_the_installed_sdk() -> None:
    keys = provider_config_keys()
    assert {"region", "profile", "assumeRoles", "defaultTags", "ignoreTags", "skipRegionValidation"} <= keys
    # Every property of the SDK's config module reads one of them.
    source = Path(pulumi_aws.__file__).parent / "config" / "vars.py"
    properties = [
        node.name
        for node in ast.walk(ast.parse(source.read_text()))
        if isinstance(node, ast.FunctionDef) and not node.name.startswith("_")
    ]
    assert len(properties) == len(keys)


def test_regions_come_from_the_sdk_with_their_partitions() -> None:
    assert regions()["us-west-2"] == "aws"
    assert regions()["us-gov-west-1"] == "aws-us-gov"
    assert sorted(r for r, p in regions().items() if p == "aws-cn") == ["cn-north-1", "cn-northwest-1"]
    assert regions()["us-iso-east-1"] == "aws-iso"


def test_the_full_instance_table_agrees_with_the_accelerated_one() -> None:
    table = instance_types()
    assert len(table) == 1363
    for name in gpu_instance_types():
        assert table[name].gpu_manufacturer == "nvidia"
        assert name in ec2_instance_type_names()
    assert table["g5.xlarge"].vcpus == 4
    assert table["m7g.large"].arch == "arm64"


def test_the_instance_tables_read_as_the_csv_module_reads_them() -> None:
    """`_rows` splits on tabs, which is right only while no cell is quoted: the csv module, which handles
    quoting, reads the same rows."""
    for path in (ALL_INSTANCE_TYPES_TSV, INSTANCE_TYPES_TSV):
        lines = [line for line in path.read_text().splitlines() if not line.startswith("#")]
        assert _rows(path) == list(csv.DictReader(lines, delimiter="\t")), path.name
        assert '"' not in path.read_text(), path.name
