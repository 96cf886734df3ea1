# The C flags of the native code, defined once. native/Makefile includes this file; setup.py reads
# its `NAME := words` lines (nothing else of make's syntax), so a change here reaches both builds.
CFLAGS_WARNINGS := -std=gnu11 -Wall -Wextra
CFLAGS_BUILD := -O2 -fPIC -fvisibility=hidden
LDLIBS := -lpthread
# Warnings are errors in the project's own builds (native/Makefile, and `pip install` with
# PYTRITON_LIKE_WERROR=1, as the top Makefile's venvs, `make dist` and the packaging test build),
# never in a user's `pip install`: a newer compiler's new warning must not fail their install.
CFLAGS_WERROR := -Werror
