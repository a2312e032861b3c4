"""The published report.json schema: valid, complete (every key described), shipped, and
enforced on every report the suite builds (conftest's autouse fixture)."""

from __future__ import annotations

import fnmatch
import json
import tomllib
from dataclasses import replace

import pytest
from conftest import DATA, ROOT, schema_errors
from jsonschema import Draft202012Validator
from profiles import memory_report

from cann_diff.pipeline import diff
from cann_diff.read import read_memory
from cann_diff.report import Invocation, json_schema
from cann_diff.report.model import BandwidthChange

SCHEMA = json_schema()
README_TEXT = (ROOT / "README.md").read_text(encoding="utf-8")
FREE_FORM = ("findings[].data", "fusion[].split_counts")  # keyed by op / type names


@pytest.fixture(scope="module")
def reports() -> list[dict]:
    """report.json of the example, of a memory pair (with HBM) and of GPU traces."""
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(ROOT)
        example = diff("examples/cann7.0.1.3", "examples/cann8.0.RC2").report
    memory = memory_report(read_memory(DATA / "memory" / "test_rank_1"),
                            read_memory(DATA / "memory" / "test_rank_0"))
    memory = replace(memory, hbm=(BandwidthChange("read", 1.0, 2.0, 1.0, 100.0, 3.0, 4.0,
                                                  1.0, 33.3, 5, 6),))
    hta = DATA / "formats" / "hta"
    gpu = diff(hta / "base.json.gz", hta / "test.json.gz").report
    invoked = replace(example, memory=memory, invocation=Invocation("cann-diff a b", "now"))
    return [example.to_dict(), invoked.to_dict(), gpu.to_dict()]


def resolve(node: dict) -> list[dict]:
    """The object schemas a node may be (through $ref and anyOf)."""
    if "$ref" in node:
        return resolve(SCHEMA["$defs"][node["$ref"].rsplit("/", 1)[1]])
    if "anyOf" in node:
        return [s for option in node["anyOf"] for s in resolve(option)]
    return [node]


def undescribed(value, node: dict, path: str) -> list[str]:
    """Key paths of ``value`` the schema ``node`` does not list (with a description)."""
    if any(path == free or path.startswith(free + ".") for free in FREE_FORM):
        return []
    missing = []
    for schema in resolve(node):
        if isinstance(value, dict) and "properties" in schema:
            for key, item in value.items():
                child = schema["properties"].get(key)
                if child is None or "description" not in child and "$ref" not in child:
                    missing.append(f"{path}.{key}".lstrip("."))
                else:
                    missing += undescribed(item, child, f"{path}.{key}".lstrip("."))
        elif isinstance(value, list) and "items" in schema:
            for item in value:
                missing += undescribed(item, schema["items"], f"{path}[]")
    return sorted(set(missing))


def test_the_schema_is_valid_json_schema_2020_12():
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["properties"]["schema"] == {"const": "cann-diff/1", "description":
                                              SCHEMA["properties"]["schema"]["description"]}


@pytest.mark.slow
def test_every_key_of_report_json_is_described(reports):
    for data in reports:
        assert schema_errors(data) == []
        assert undescribed(data, SCHEMA, "") == []


def test_every_listed_property_has_a_description():
    def walk(node, path):
        for key, child in node.get("properties", {}).items():
            assert "description" in child or "$ref" in child, f"{path}.{key}"
            walk(child, f"{path}.{key}")
        if isinstance(node.get("items"), dict):
            walk(node["items"], path + "[]")
        for option in node.get("anyOf", []):
            walk(option, path)
    walk(SCHEMA, "")
    for name, definition in SCHEMA["$defs"].items():
        walk(definition, name)


def test_additional_keys_from_other_stages_do_not_break_it(reports):
    data = json.loads(json.dumps(reports[0]))
    data["framework_ops"] = [{"name": "aten::mm"}]  # a later, additive field
    data["operators"][0]["status"] = "count-changed"  # a new status
    data["communication"][0]["base_idle_us"] = 1.0
    assert schema_errors(data) == []


@pytest.mark.slow
def test_a_wrong_type_fails_the_test_that_builds_it(reports):
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(ROOT)
        report = diff("examples/cann7.0.1.3", "examples/cann8.0.RC2").report
    broken = replace(report, step=replace(report.step, status=None))
    with pytest.raises(AssertionError, match="report.schema.json.*step/status"):
        broken.to_dict()


def test_the_package_ships_the_schema():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = data["tool"]["setuptools"]["package-data"]["cann_diff"]
    assert any(fnmatch.fnmatch("data/report.schema.json", p) for p in patterns)
    assert "jsonschema" in " ".join(data["project"]["optional-dependencies"]["test"])


def test_the_readme_documents_the_contract_inside_the_repository():
    assert "cann_diff/data/report.schema.json" in README_TEXT
    assert "../shared" not in README_TEXT.split("## The report", 1)[1].split("\n## ", 1)[0]
    for key in ("schema", "tool", "invocation", "base", "new", "step", "operators",
                "families", "findings", "ranks", "comm_groups", "memory"):
        assert f"`{key}`" in README_TEXT, key
