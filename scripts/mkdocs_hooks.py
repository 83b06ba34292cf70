"""mkdocs hook (mkdocs.yml ``hooks:``): the user guide's notebooks, rendered as pages.

The notebooks stay where they are (``notebooks/*.ipynb``, the user guide run by the tests);
this adds each one to the site's files as ``notebooks/NAME.ipynb``, read from the
repository, so the nav names them and mkdocs-jupyter renders them (without running them).
No copy and no symbolic link: a clean clone builds the same site.
"""

from __future__ import annotations

from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.plugins import event_priority
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent.parent


@event_priority(100)  # before mkdocs-jupyter's on_files, which turns them into pages
def on_files(files: Files, config: MkDocsConfig) -> Files:
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        files.append(File(f"notebooks/{notebook.name}", src_dir=str(ROOT),
                          dest_dir=config.site_dir,
                          use_directory_urls=config.use_directory_urls))
    return files
