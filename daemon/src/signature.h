/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Root hash signatures, checked in userspace with OpenSSL as systemd 254+
 * does (dissect-image.c validate_signature_userspace()): a PKCS#7 signature
 * (DER) over the root hash in lower-case hex, by a certificate found as is
 * (PKCS7_NOINTERN | PKCS7_NOVERIFY: no chain, no certificate the signature
 * carries itself) among the PEM files *.crt in verity.d below root:
 * /etc/verity.d, /run/verity.d, /usr/local/lib/verity.d, /usr/lib/verity.d,
 * a file name in an earlier directory masking the same name in a later one
 * (a symlink to /dev/null masks it away). A certificate file only root can
 * write counts (trust.h); others are named in the reason and ignored.
 */

#include <stddef.h>

/*
 * Returns 1 if sig is a good signature of root_hash_hex by one of those
 * certificates (*ret_signer: its subject and file), 0 and the reason if not
 * (not PKCS#7, no such certificate, another key, another root hash), or a
 * negative errno.
 */
int signature_verify(const char *root, const char *root_hash_hex, const void *sig, size_t sig_size,
                     char **ret_signer, char **ret_reason);
