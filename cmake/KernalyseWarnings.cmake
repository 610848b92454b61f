# One interface target carries the project's warning flags; every kernalyse target links it.
add_library(kernalyse_warnings INTERFACE)
target_compile_options(kernalyse_warnings INTERFACE -Wall -Wextra)
add_library(kernalyse::warnings ALIAS kernalyse_warnings)
