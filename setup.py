"""Package discovery only (metadata is in pyproject.toml).

The top-level callbacks/, datamodules/ and kernels/ folders are installed as litlab.callbacks,
litlab.datamodules and litlab.kernels; configs/ and data/ as litlab.configs and litlab.data, whose
every sub-folder is listed as a (namespace) package holding data files, so setuptools neither
warns nor drops any of them; YAML files inside a code package (a method's prompt templates) are
installed with it. Adding a folder never needs an edit here.
"""

from setuptools import find_namespace_packages, find_packages, setup

CODE_FOLDERS = ("callbacks", "datamodules", "kernels")
DATA_FOLDERS = ("configs", "data")

packages = find_packages("src") + find_namespace_packages("src", include=["hydra_plugins.*"])
package_data = {name: ["**/*.yaml"] for name in find_packages("src")}
for folder in CODE_FOLDERS:
    packages += [f"litlab.{name}" for name in find_packages(".", include=[folder, f"{folder}.*"])]
for folder in DATA_FOLDERS:
    names = [f"litlab.{name}" for name in find_namespace_packages(".", include=[folder, f"{folder}.*"])]
    packages += names
    package_data.update({name: ["*"] for name in names})

setup(packages=packages, package_data=package_data)
