################################################################################
#
# kreflect
#
################################################################################

# The repository and tag to build: set KREFLECT_SITE to where your kreflect
# comes from (or KREFLECT_OVERRIDE_SRCDIR in local.mk to build a checkout).
KREFLECT_VERSION = v1.1.0
KREFLECT_SITE = https://git.example.org/kreflect.git
KREFLECT_SITE_METHOD = git
KREFLECT_INSTALL_STAGING = YES

# kreflect compiles mbedTLS 3.6 with its own configuration into its binary, and
# reads JSON with jsmn's single header: both are fetched beside it, the exact
# files Debian trixie ships (their sha256 in kreflect.hash), and unpacked into
# the build directory.
KREFLECT_MBEDTLS_VERSION = 3.6.6
KREFLECT_JSMN_VERSION = 1.1.0
KREFLECT_MBEDTLS_SOURCE = mbedtls_$(KREFLECT_MBEDTLS_VERSION).orig.tar.bz2
KREFLECT_JSMN_SOURCE = jsmn_$(KREFLECT_JSMN_VERSION).orig.tar.gz
KREFLECT_EXTRA_DOWNLOADS = \
	http://deb.debian.org/debian/pool/main/m/mbedtls/$(KREFLECT_MBEDTLS_SOURCE) \
	http://deb.debian.org/debian/pool/main/j/jsmn/$(KREFLECT_JSMN_SOURCE)

define KREFLECT_EXTRACT_DEPS
	mkdir -p $(@D)/pkg-deps
	$(TAR) -C $(@D)/pkg-deps -xjf $(KREFLECT_DL_DIR)/$(KREFLECT_MBEDTLS_SOURCE)
	$(TAR) -C $(@D)/pkg-deps -xzf $(KREFLECT_DL_DIR)/$(KREFLECT_JSMN_SOURCE)
endef
KREFLECT_POST_EXTRACT_HOOKS += KREFLECT_EXTRACT_DEPS

# kreflect's name for the CPU; the toolchain's own flags choose the rest
# (ARCH_FLAGS= leaves out the ones kreflect's Makefile gives its musl compilers).
KREFLECT_TARGET = $(if $(BR2_aarch64),aarch64,$(if $(BR2_x86_64),x86_64,armv7))
KREFLECT_MAKE_OPTS = \
	TARGET=$(KREFLECT_TARGET) \
	CC="$(TARGET_CC)" \
	CROSS_COMPILE="$(TARGET_CROSS)" \
	ARCH_FLAGS= \
	MBEDTLS_DIR=$(@D)/pkg-deps/mbedtls-$(KREFLECT_MBEDTLS_VERSION) \
	JSMN_SRC=$(@D)/pkg-deps/jsmn-$(KREFLECT_JSMN_VERSION)/jsmn.h \
	PREFIX=/usr

define KREFLECT_BUILD_CMDS
	$(TARGET_MAKE_ENV) $(MAKE) -C $(@D) $(KREFLECT_MAKE_OPTS) target-bin target-lib
endef

# The header, archives and kreflect.pc for other packages that link the library.
define KREFLECT_INSTALL_STAGING_CMDS
	$(TARGET_MAKE_ENV) $(MAKE) -C $(@D) $(KREFLECT_MAKE_OPTS) DESTDIR=$(STAGING_DIR) install
endef

# The binary (Buildroot's target-finalize drops the man page and the archives).
define KREFLECT_INSTALL_TARGET_CMDS
	$(TARGET_MAKE_ENV) $(MAKE) -C $(@D) $(KREFLECT_MAKE_OPTS) DESTDIR=$(TARGET_DIR) install
endef

define KREFLECT_INSTALL_INIT_SYSTEMD
	$(INSTALL) -D -m 0644 $(@D)/config/examples/systemd/kreflect.service \
		$(TARGET_DIR)/usr/lib/systemd/system/kreflect.service
endef

$(eval $(generic-package))
