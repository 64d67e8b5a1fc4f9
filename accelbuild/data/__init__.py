"""Representative inputs: image folders with preprocessing, ``.npy`` arrays, and seeded random inputs. See ``docs/data.md``."""

from accelbuild.data.files import data_files
from accelbuild.data.load import iter_inputs, load_inputs
from accelbuild.data.random import random_inputs
from accelbuild.data.spec import DataSpec, InputInfo, guess_layout, input_infos

__all__ = ["DataSpec", "InputInfo", "data_files", "guess_layout", "input_infos", "iter_inputs",
           "load_inputs", "random_inputs"]
