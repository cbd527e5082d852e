"""The chart rendered once per test session with the default and the production values."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
import yaml

from tests.support.helm_chart import CASES, CRD_FILES, KUBERAY_SCHEMAS, PROD, render_raw


@pytest.fixture(scope="session", params=sorted(CASES))
def objects(request) -> list[dict[str, Any]]:
    return render_raw(CASES[request.param])


@pytest.fixture(scope="session")
def default_objects() -> list[dict[str, Any]]:
    return render_raw(None)


@pytest.fixture(scope="session")
def prod_objects() -> list[dict[str, Any]]:
    return render_raw(PROD)


@pytest.fixture(scope="session")
def crd_validators() -> dict[str, tuple[Any, dict[str, Any]]]:
    out = {}
    for kind, name in CRD_FILES.items():
        crd = yaml.load((KUBERAY_SCHEMAS / name).read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
        schema = version["schema"]["openAPIV3Schema"]
        out[kind] = (jsonschema.validators.validator_for(schema)(schema), schema)
    return out
