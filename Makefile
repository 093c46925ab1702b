# SPDX-License-Identifier: GPL-2.0
#
# make [KVER=<release>]        build every module for that installed kernel
# make all-kernels             build for every test kernel (scripts/kernels test)
# make install / uninstall     install into /lib/modules/<release>/updates/ssd-iosched
# make deb                     the DKMS Debian package, in .build/deb/
# make install-src DESTDIR=D   the source tree DKMS builds from, into D
# make check                   install dependencies, run the static, unit and VM tiers
# make check-debug             the debug kernel's tier (lockdep, KASAN, fault injection)
# make demo [DEMO_ARGS=...]    the benchmark demonstration in the VM (bench/README.md)
# make clean
#
# Extra kbuild options pass through: make W=1 C=2 KVER=...
SHELL := /bin/bash
TOP := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))

# The running kernel if its headers are installed; otherwise say which.
ifeq ($(origin KVER),undefined)
KVER := $(shell uname -r)
KVER_DEFAULTED := 1
endif
# The headers: this machine's, the debug kernel's tree (scripts/debugkernel),
# or the trixie build root's (scripts/buildroot), where the build then runs
# (its compiler; this tree mounted at its path).
ifeq ($(origin KDIR),undefined)
KDIR := $(shell $(TOP)/scripts/kernels headers $(KVER) 2>/dev/null)
KROOT := $(if $(KDIR),$(shell $(TOP)/scripts/kernels chroot $(KVER)))
else
KROOT :=
endif
ifeq ($(KROOT),)
IN_ROOT :=
KDIR_IN := $(KDIR)
else
IN_ROOT = $(TOP)/scripts/buildroot run -b $(TOP) -b $(BUILD_ROOT) $(1) --
KDIR_IN := $(patsubst $(KROOT)%,%,$(KDIR))
endif

# The project's version: dkms.conf's PACKAGE_VERSION, the one place it is
# written (MODULE_VERSION, the Debian package's version).
VERSION := $(shell sed -n 's/^PACKAGE_VERSION="\(.*\)"$$/\1/p' $(TOP)/dkms.conf)

BUILD_ROOT ?= $(TOP)/.build
BUILD := $(BUILD_ROOT)/$(KVER)
MOD_DIRS := $(shell sed -n 's|^obj-m *+= *\(.*\)/ *$$|\1|p' $(TOP)/Kbuild)
INSTALL_DIRS := $(filter-out tests/%,$(MOD_DIRS))
INSTALL_PATH := $(INSTALL_MOD_PATH)/lib/modules/$(KVER)/updates/ssd-iosched

.PHONY: all modules all-kernels install uninstall check check-debug clean kdir-check demo lttng-probes \
	install-src deb

all: modules

kdir-check:
ifeq ($(KDIR),)
	@echo "No build headers for kernel $(KVER)$(if $(KVER_DEFAULTED), (the running kernel)).";	\
	k=$$($(TOP)/scripts/kernels buildable);								\
	if [ -n "$$k" ]; then echo "Kernels this machine can build for (make KVER=...):"; echo "$$k" | sed 's/^/  /';	\
	else echo "No kernel headers are installed: run scripts/setup, or install linux-headers-$(KVER)."; fi;	\
	exit 1
endif

modules: kdir-check
	@priv=$$($(TOP)/scripts/ksrc $(KVER)) || exit 1;					\
	mkdir -p $(BUILD);									\
	cd $(TOP) && tar -c Kbuild compat elevator tracepoints $(MOD_DIRS) | tar -x -C $(BUILD) &&			\
	$(call IN_ROOT,-b $$priv) $(MAKE) -C $(KDIR_IN) M=$(BUILD) IOSCHED_TOP=$(BUILD) IOSCHED_PRIV=$$priv \
		IOSCHED_VERSION=$(VERSION) modules
	@cd $(BUILD) && find . -name '*.ko' | sort | sed 's|^\./|built: $(BUILD)/|'

# The LTTng tracer (fetched and built by scripts/lttng-modules) and the
# project's probes for it, in $(BUILD)/lttng/ (debug info stripped).
lttng-probes: modules
	@lt=$$($(TOP)/scripts/lttng-modules $(KVER)) || exit 1;				\
	rm -rf $(BUILD)/lttng && mkdir -p $(BUILD)/lttng/probes &&				\
	cp -a $(TOP)/tracepoints/lttng/. $(BUILD)/lttng/probes/ &&				\
	$(call IN_ROOT,-b $$lt) $(MAKE) -C $(KDIR_IN) M=$(BUILD)/lttng/probes LTTNG_SRC=$$lt IOSCHED_TOP=$(BUILD) \
		KBUILD_EXTRA_SYMBOLS=$$lt/src/Module.symvers modules &&			\
	find $$lt/src -name '*.ko' -exec cp {} $(BUILD)/lttng/ \; &&				\
	strip --strip-debug $(BUILD)/lttng/*.ko $(BUILD)/lttng/probes/*.ko &&			\
	ls $(BUILD)/lttng/probes/*.ko | sed 's|^|built: |'

all-kernels:
	@set -e; for k in $$($(TOP)/scripts/kernels test); do $(MAKE) -C $(TOP) KVER=$$k modules; done

install: modules
	@mkdir -p $(INSTALL_PATH)
	@for d in $(INSTALL_DIRS); do for m in $(BUILD)/$$d/*.ko; do				\
		install -m 644 $$m $(INSTALL_PATH)/ && echo "installed $(INSTALL_PATH)/$${m##*/}"; done; done
	@[ -n "$(INSTALL_MOD_PATH)" ] || depmod -a $(KVER)

uninstall:
	rm -rf $(INSTALL_PATH)
	@[ -n "$(INSTALL_MOD_PATH)" ] || depmod -a $(KVER)

# What DKMS builds from (/usr/src/ssd-iosched-<version>/): the modules'
# sources and what `make modules` needs to find headers and private headers.
SRC_FILES := Kbuild Kconfig Makefile dkms.conf compat elevator tracepoints/trace $(MOD_DIRS) \
	scripts/kernels scripts/ksrc

install-src:
	@[ -n "$(DESTDIR)" ] || { echo "usage: make install-src DESTDIR=<directory>"; exit 1; }
	@mkdir -p $(DESTDIR) && cd $(TOP) && tar -c $(SRC_FILES) | tar -x -C $(DESTDIR)

# ssd-iosched-dkms_<version>_all.deb, built with debhelper and dh_dkms from
# packaging/debian in a copy of the tree (packaging/README.md).
DEB_DIR := $(BUILD_ROOT)/deb
deb:
	@for t in dpkg-buildpackage dh dh_dkms; do command -v $$t >/dev/null ||			\
		{ echo "make deb needs $$t: apt-get install dpkg-dev debhelper dh-dkms"; exit 1; }; done
	@rm -rf $(DEB_DIR) && mkdir -p $(DEB_DIR)/ssd-iosched-$(VERSION)
	@$(MAKE) -s -C $(TOP) install-src DESTDIR=$(DEB_DIR)/ssd-iosched-$(VERSION)
	@cp -a $(TOP)/packaging/debian $(TOP)/packaging/examples $(TOP)/README.md $(DEB_DIR)/ssd-iosched-$(VERSION)/
	@cp $(TOP)/packaging/README.md $(DEB_DIR)/ssd-iosched-$(VERSION)/README.packaging.md
	@$(TOP)/packaging/changelog $(VERSION) > $(DEB_DIR)/ssd-iosched-$(VERSION)/debian/changelog
	@cd $(DEB_DIR)/ssd-iosched-$(VERSION) && dpkg-buildpackage -b -us -uc > ../build.log 2>&1 ||	\
		{ tail -30 ../build.log; echo "make deb: dpkg-buildpackage failed (log: $(DEB_DIR)/build.log)"; exit 1; }
	@echo "built: $(DEB_DIR)/ssd-iosched-dkms_$(VERSION)_all.deb"

# CHECK_STARTED: tests/run's time budget counts from here (BUDGET_MIN);
# scripts/cpucap: the tests at 95 % of the CPUs, below the host's stalls
check:
	export CHECK_STARTED=$$(date +%s) && $(TOP)/scripts/setup && $(TOP)/scripts/cpucap $(TOP)/tests/run

# The debug tier (lockdep, KASAN, UBSAN, kmemleak, fault injection), apart
# from make check for time (tests/README.md); its kernel is built on first use.
check-debug:
	$(TOP)/scripts/setup && $(TOP)/scripts/cpucap $(TOP)/tests/run --tier debug

clean:
	rm -rf $(BUILD_ROOT)

# Every benchmark suite, short, in the VM on each test kernel (bench/README.md).
# the first test kernel; DEMO_ARGS=--all-kernels for each
demo:
	cd $(TOP) && /usr/bin/python3 -m bench demo $(DEMO_ARGS)
