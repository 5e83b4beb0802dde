/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * libcrypto and libcryptsetup, loaded on first use (dlopen), as systemd
 * loads libcryptsetup: most refreshes check no signature and set up no
 * dm-verity device, and linking both (with libcryptsetup's libdevmapper,
 * libargon2, libudev) made every tuckctl start and tuckd's idle footprint
 * pay for them. Calls go through the sym_ pointers below, typed by the
 * libraries' own headers.
 *
 * A library is only ever loaded in the mount namespace and root the process
 * started in: tuck enters the staging namespace and chroots into staged
 * images, and a library found there would run as root. A load asked for
 * anywhere else is refused (and the image with it), never done.
 */

#include <libcryptsetup.h>
#include <stdbool.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/objects.h>
#include <openssl/pem.h>
#include <openssl/pkcs7.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>

#define LIBCRYPTO_SONAME "libcrypto.so.3"
#define LIBCRYPTSETUP_SONAME "libcryptsetup.so.12"

#define LIBCRYPTO_SYMBOLS(X)                                                                     \
        X(ASN1_INTEGER_to_BN) X(ASN1_STRING_get0_data) X(ASN1_STRING_length) X(BIO_f_buffer)     \
        X(BIO_free) X(BIO_free_all) X(BIO_new) X(BIO_new_mem_buf) X(BIO_push) X(BN_bn2hex)       \
        X(BN_free) X(CRYPTO_free) X(ERR_clear_error) X(ERR_error_string_n)                      \
        X(ERR_peek_last_error) X(EVP_DecodeBlock) X(EVP_PKEY_CTX_free) X(EVP_PKEY_CTX_new)       \
        X(EVP_PKEY_CTX_set_rsa_padding) X(EVP_PKEY_get_base_id) X(EVP_PKEY_verify_recover)       \
        X(EVP_PKEY_verify_recover_init) X(OBJ_obj2nid) X(OPENSSL_sk_free) X(OPENSSL_sk_new_null) \
        X(OPENSSL_sk_num) X(OPENSSL_sk_pop_free) X(OPENSSL_sk_push) X(OPENSSL_sk_value)          \
        X(PEM_read_X509) X(PKCS7_free) X(PKCS7_get0_signers) X(PKCS7_get_signer_info)            \
        X(PKCS7_verify) X(X509_NAME_oneline) X(X509_find_by_issuer_and_serial) X(X509_free)      \
        X(X509_get0_pubkey) X(X509_get_subject_name) X(d2i_PKCS7)

#define LIBCRYPTSETUP_SYMBOLS(X)                                                                 \
        X(crypt_activate_by_signed_key) X(crypt_activate_by_volume_key) X(crypt_deactivate_by_name) \
        X(crypt_free) X(crypt_get_volume_key_size) X(crypt_init_by_name) X(crypt_init_data_device)  \
        X(crypt_load) X(crypt_set_log_callback) X(crypt_volume_key_get)

#define DL_DECLARE_SYM(s) extern typeof(s) *sym_##s;
LIBCRYPTO_SYMBOLS(DL_DECLARE_SYM)
LIBCRYPTSETUP_SYMBOLS(DL_DECLARE_SYM)
#undef DL_DECLARE_SYM

/*
 * Load the library (once; later calls return at once): 1, or 0 and in
 * *ret_reason why it cannot be used (not installed, another version, asked
 * for outside the mount namespace and root tuck started in), for the caller
 * to refuse what needed it.
 */
int dlopen_libcrypto(char **ret_reason);
int dlopen_libcryptsetup(char **ret_reason);

/* Is it loaded already (for the tests)? */
bool libcrypto_loaded(void);
bool libcryptsetup_loaded(void);
