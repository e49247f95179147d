# Sphinx configuration of sublet's documentation: MyST Markdown pages and, through breathe, the
# C++ API reference from Doxygen's XML (scripts/build_docs.sh runs Doxygen first).
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _project_version():
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        match = re.search(r"project\(sublet VERSION ([0-9.]+)", f.read())
    return match.group(1)


project = "sublet"
author = "the sublet authors"
copyright = "2026, the sublet authors (BSD-3-Clause)"
release = version = _project_version()

extensions = ["myst_parser", "breathe"]
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build"]
nitpicky = False

breathe_projects = {"sublet": os.environ.get("SUBLET_DOXYGEN_XML", os.path.join(ROOT, "build-docs", "doxygen", "xml"))}
breathe_default_project = "sublet"
breathe_domain_by_extension = {"h": "cpp"}

html_theme = "furo"
html_title = f"sublet {release}"
html_static_path = []
highlight_language = "none"  # unlabelled blocks are program output, not Python
