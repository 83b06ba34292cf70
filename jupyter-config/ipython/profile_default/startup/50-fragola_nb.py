# Load the fragola_nb magics (%%fragola, %fragola_panel, ...) in every IPython session and
# Jupyter kernel of this IPython profile, without %load_ext. Opt in by copying this file:
#
#     cp jupyter-config/ipython/profile_default/startup/50-fragola_nb.py \
#        "$(ipython locate profile)/startup/"
#
# A Python environment without fragola_nb is left alone.
try:
    get_ipython().extension_manager.load_extension("fragola_nb")  # type: ignore[name-defined]  # noqa: F821
except ModuleNotFoundError:
    pass
