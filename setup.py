"""Package discovery only (metadata is in pyproject.toml).

The top-level callbacks/, datamodules/ and kernels/ folders are installed as litlab.callbacks,
litlab.datamodules and litlab.kernels; configs/ and data/ as litlab.configs and litlab.data, whose
every sub-folder is listed as a (namespace) package holding data files, so setuptools neither
warns nor drops any of them; so is a folder of YAML files inside a code package (a method's prompt
templates), installed with it. Adding a folder never needs an edit here.
"""

from pathlib import Path

from setuptools import find_namespace_packages, find_packages, setup

CODE_FOLDERS = ("callbacks", "datamodules", "kernels")
DATA_FOLDERS = ("configs", "data")

code = find_packages("src")
yaml_folders = [
    name
    for name in find_namespace_packages("src", include=["litlab.*"])
    if name not in code and any(Path("src", *name.split(".")).glob("*.yaml"))
]
packages = code + yaml_folders + find_namespace_packages("src", include=["hydra_plugins.*"])
package_data = {name: ["*.yaml"] for name in code + yaml_folders}
for folder in CODE_FOLDERS:
    packages += [f"litlab.{name}" for name in find_packages(".", include=[folder, f"{folder}.*"])]
for folder in DATA_FOLDERS:
    names = [f"litlab.{name}" for name in find_namespace_packages(".", include=[folder, f"{folder}.*"])]
    packages += names
    package_data.update({name: ["*"] for name in names})

setup(packages=packages, package_data=package_data)
