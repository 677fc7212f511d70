"""Make `groupd.storage` importable from a source checkout that has not been pip-installed.

setuptools maps the repository's `storage/` folder to `groupd.storage`; without an (editable)
install that mapping does not exist, so register the package from its folder by hand.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path


def _ensure_groupd_storage() -> None:
    try:
        import groupd.storage  # noqa: F401

        return
    except ImportError:
        pass
    root = Path(__file__).resolve().parents[2]
    if "groupd" not in sys.modules:
        spec = importlib.util.spec_from_loader("groupd", loader=None, is_package=True)
        assert spec is not None
        pkg = importlib.util.module_from_spec(spec)
        pkg.__path__ = [str(root / "groupd")]
        sys.modules["groupd"] = pkg
    spec = importlib.util.spec_from_file_location(
        "groupd.storage", root / "storage" / "__init__.py", submodule_search_locations=[str(root / "storage")]
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["groupd.storage"] = module
    spec.loader.exec_module(module)


_ensure_groupd_storage()
sys.path.insert(0, str(Path(__file__).parent))  # for `import storage_helpers`
