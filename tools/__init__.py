"""The lab: tools that calibrate and check accelbuild's performance models against published figures.

They are run by the developers, not by a build, and are not part of the installed package (run them from the
repository root, e.g. ``python -m tools.credibility``): ``credibility`` fits the npu profiles' free parameters
and writes the bands reports quote, ``credibility_mx3`` is its mx3 part, ``siblings`` and
``mx3_vendor_reading`` read the published figures against each other, ``npu_calibration`` prices a profile's
published points, and ``networks/`` holds the scripts that rebuild the published networks in a torch venv.
Timing scripts stay in ``bench/``.
"""
