"""Built-in hardware profile files (package data), and the kind of file they are."""

from accelbuild.targets.profile_files import ProfileKind

MX3_PROFILES = ProfileKind("hardware.schema.json", "accelbuild.targets.mx3.profiles",
                           "accelbuild.targets.mx3.profile_rules")
