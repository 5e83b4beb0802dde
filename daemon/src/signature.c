/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "crypto-dl.h"
#include "log.h"
#include "signature.h"
#include "trust.h"
#include "util.h"

static const char * const cert_dirs[] = {
        "/etc/verity.d",
        "/run/verity.d",
        "/usr/local/lib/verity.d",
        "/usr/lib/verity.d",
};

typedef struct Certs {
        STACK_OF(X509) *stack;
        char **files;            /* parallel to stack */
        char **names;            /* every file name seen, masked ones included */
        char *ignored;           /* "'/etc/verity.d/x.crt' is writable by others; ..." */
} Certs;

/* OpenSSL's sk_X509_*() are inline calls into libcrypto: these are the same, through the loaded one. */
static int stack_num(const STACK_OF(X509) *s) {
        return sym_OPENSSL_sk_num((const OPENSSL_STACK *) s);
}

static X509 *stack_value(const STACK_OF(X509) *s, int i) {
        return sym_OPENSSL_sk_value((const OPENSSL_STACK *) s, i);
}

static void x509_free(void *x) {
        sym_X509_free(x);
}

/* The first signer info of a signed PKCS#7, or NULL. */
static PKCS7_SIGNER_INFO *first_signer_info(PKCS7 *p7) {
        STACK_OF(PKCS7_SIGNER_INFO) *infos = sym_PKCS7_get_signer_info(p7);

        return infos ? sym_OPENSSL_sk_value((const OPENSSL_STACK *) infos, 0) : NULL;
}

static void certs_done(Certs *c) {
        if (c->stack)
                sym_OPENSSL_sk_pop_free((OPENSSL_STACK *) c->stack, x509_free);
        strv_free(c->files);
        strv_free(c->names);
        free(c->ignored);
}

static int note_ignored(Certs *c, const char *why) {
        char *s = c->ignored ? strjoin(c->ignored, "; ", why) : strdup(why);

        if (!s)
                return -ENOMEM;
        free(c->ignored);
        c->ignored = s;
        return 0;
}

static int load_cert(Certs *c, const char *path) {
        _cleanup_free_ char *reason = NULL;
        X509 *x;
        FILE *f;
        int r;

        r = trust_check_path(path, TRUST_FILE, NULL, NULL, &reason);
        if (r < 0)
                return note_ignored(c, strerror(-r));
        if (r == 0)
                return note_ignored(c, reason);
        f = fopen(path, "re");
        if (!f)
                return note_ignored(c, path);
        x = sym_PEM_read_X509(f, NULL, NULL, NULL);
        fclose(f);
        if (!x) {
                _cleanup_free_ char *why = strjoin("'", path, "' is no PEM certificate");

                return why ? note_ignored(c, why) : -ENOMEM;
        }
        if (!sym_OPENSSL_sk_push((OPENSSL_STACK *) c->stack, x)) {
                sym_X509_free(x);
                return -ENOMEM;
        }
        return strv_extend(&c->files, path);
}

/* conf_files semantics: *.crt, the first directory with a name wins, /dev/null masks. */
static int load_dir(Certs *c, const char *root, const char *dir) {
        _cleanup_free_ char *path = path_join(root, dir);
        _cleanup_strv_free_ char **entries = NULL;
        _cleanup_closedir_ DIR *d = NULL;
        int r;

        if (!path)
                return -ENOMEM;
        d = opendir(path);
        if (!d)
                return 0;
        for (struct dirent *de; (de = readdir_no_dot(d)); )
                if (endswith(de->d_name, ".crt") && strv_extend(&entries, de->d_name) < 0)
                        return -ENOMEM;
        strv_sort(entries);
        STRV_FOREACH(e, entries) {
                _cleanup_free_ char *p = path_join(path, *e), *target = NULL;

                if (!p)
                        return -ENOMEM;
                if (strv_contains(c->names, *e))
                        continue;
                if (strv_extend(&c->names, *e) < 0)
                        return -ENOMEM;
                target = realpath(p, NULL);
                if (target && streq(target, "/dev/null"))
                        continue;
                r = load_cert(c, p);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int certs_load(const char *root, Certs *c) {
        int r;

        c->stack = (STACK_OF(X509) *) sym_OPENSSL_sk_new_null();
        if (!c->stack)
                return -ENOMEM;
        for (size_t i = 0; i < ELEMENTSOF(cert_dirs); i++) {
                r = load_dir(c, root, cert_dirs[i]);
                if (r < 0)
                        return r;
        }
        return 0;
}

static char *name_oneline(const X509_NAME *n) {
        char buf[256];

        return strdup(sym_X509_NAME_oneline(n, buf, sizeof(buf)) ?: "?");
}

/* Who the signature says signed it: issuer and serial of its (first) signer info. */
static char *claimed_signer(PKCS7 *p7) {
        PKCS7_SIGNER_INFO *si = first_signer_info(p7);
        _cleanup_free_ char *issuer = NULL;
        BIGNUM *bn = NULL;
        char *hex = NULL, *s = NULL;

        if (!si || !si->issuer_and_serial)
                return strdup("no signer");
        issuer = name_oneline(si->issuer_and_serial->issuer);
        bn = sym_ASN1_INTEGER_to_BN(si->issuer_and_serial->serial, NULL);
        hex = bn ? sym_BN_bn2hex(bn) : NULL;
        (void) asprintf_safe(&s, "issuer %s, serial %s", strna(issuer), hex ?: "?");
        sym_CRYPTO_free(hex, OPENSSL_FILE, OPENSSL_LINE);
        sym_BN_free(bn);
        return s;
}

static char *cert_file(const Certs *c, X509 *x) {
        for (int i = 0; i < stack_num(c->stack); i++)
                if (stack_value(c->stack, i) == x)
                        return c->files[i];
        return NULL;
}

/*
 * The signature does not verify with the certificate it names: a key that
 * is not the certificate's (or a corrupt signature), or the right key over
 * other data. Without signed attributes (systemd-repart and openssl smime
 * -noattr sign so) the RSA signature is over the data's digest itself, so
 * recovering it with the certificate's public key tells the two apart:
 * that only succeeds if the certificate's key made the signature.
 */
static bool signed_by_its_certificate(PKCS7 *p7, const Certs *c) {
        PKCS7_SIGNER_INFO *si = first_signer_info(p7);
        unsigned char out[1024];
        size_t n = sizeof(out);
        EVP_PKEY_CTX *ctx = NULL;
        EVP_PKEY *key;
        X509 *x;
        bool ok;

        if (!si || !si->issuer_and_serial || !si->enc_digest)
                return false;
        x = sym_X509_find_by_issuer_and_serial(c->stack, si->issuer_and_serial->issuer, si->issuer_and_serial->serial);
        key = x ? sym_X509_get0_pubkey(x) : NULL;
        if (!key || sym_EVP_PKEY_get_base_id(key) != EVP_PKEY_RSA)
                return false;
        ctx = sym_EVP_PKEY_CTX_new(key, NULL);
        ok = ctx && sym_EVP_PKEY_verify_recover_init(ctx) == 1 &&
             sym_EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_PADDING) == 1 &&
             sym_EVP_PKEY_verify_recover(ctx, out, &n, sym_ASN1_STRING_get0_data(si->enc_digest),
                                     (size_t) sym_ASN1_STRING_length(si->enc_digest)) == 1;
        sym_EVP_PKEY_CTX_free(ctx);
        return ok;
}

/* Why sym_PKCS7_verify() said no, in words an operator can act on. */
static int refusal(PKCS7 *p7, const Certs *c, unsigned long e, char **ret_reason) {
        _cleanup_free_ char *who = claimed_signer(p7);
        char buf[256];

        sym_ERR_error_string_n(e, buf, sizeof(buf));
        if (ERR_GET_LIB(e) == ERR_LIB_PKCS7)
                switch (ERR_GET_REASON(e)) {
                case PKCS7_R_SIGNER_CERTIFICATE_NOT_FOUND:
                        (void) asprintf_safe(ret_reason, "signed by a certificate not in verity.d (%s)%s%s",
                                             strna(who), c->ignored ? "; ignored: " : "", strempty(c->ignored));
                        return 0;
                case PKCS7_R_DIGEST_FAILURE:
                        (void) asprintf_safe(ret_reason, "the signature (%s) is over another root hash", strna(who));
                        return 0;
                case PKCS7_R_SIGNATURE_FAILURE:
                        if (signed_by_its_certificate(p7, c))
                                (void) asprintf_safe(ret_reason, "the signature (%s) is over another root hash",
                                                     strna(who));
                        else
                                (void) asprintf_safe(ret_reason, "the signature does not verify with the certificate "
                                                     "it names (%s): made with another key, or corrupt", strna(who));
                        return 0;
                default:
                        break;
                }
        (void) asprintf_safe(ret_reason, "the signature (%s) does not verify: %s", strna(who), buf);
        return 0;
}

int signature_verify(const char *root, const char *root_hash_hex, const void *sig, size_t sig_size,
                     char **ret_signer, char **ret_reason) {
        _cleanup_(certs_done) Certs c = {};
        const unsigned char *p = sig;
        STACK_OF(X509) *signers = NULL;
        PKCS7 *p7 = NULL;
        BIO *data = NULL, *mem;
        int r;

        r = dlopen_libcrypto(ret_reason);
        if (r <= 0)
                return r;
        r = certs_load(root, &c);
        if (r < 0)
                return r;

        sym_ERR_clear_error();
        p7 = sym_d2i_PKCS7(NULL, &p, (long) sig_size);
        if (!p7 || sym_OBJ_obj2nid(p7->type) != NID_pkcs7_signed) {
                (void) asprintf_safe(ret_reason, "the signature is no PKCS#7 signed-data (DER): corrupt");
                r = 0;
                goto finish;
        }
        if (stack_num(c.stack) == 0) {
                _cleanup_free_ char *who = claimed_signer(p7);

                (void) asprintf_safe(ret_reason, "signed (%s), but no certificate in verity.d to check it "
                                     "against%s%s", strna(who), c.ignored ? "; ignored: " : "", strempty(c.ignored));
                r = 0;
                goto finish;
        }
        /* Behind a buffer BIO: given a memory BIO, OpenSSL 3.0's sym_PKCS7_verify() copies it and
         * leaks the copy when the signature's digest or content cannot be set up (a hostile
         * .p7s, every refresh; found by fuzz-sidecars). Given any other BIO, it makes no copy. */
        data = sym_BIO_new(sym_BIO_f_buffer());
        mem = sym_BIO_new_mem_buf(root_hash_hex, (int) strlen(root_hash_hex));
        if (!data || !mem) {
                sym_BIO_free(mem);
                r = -ENOMEM;
                goto finish;
        }
        sym_BIO_push(data, mem);
        if (sym_PKCS7_verify(p7, c.stack, NULL, data, NULL, PKCS7_NOINTERN | PKCS7_NOVERIFY) != 1) {
                r = refusal(p7, &c, sym_ERR_peek_last_error(), ret_reason);
                goto finish;
        }
        signers = sym_PKCS7_get0_signers(p7, c.stack, PKCS7_NOINTERN);
        if (ret_signer) {
                X509 *x = signers ? stack_value(signers, 0) : NULL;
                _cleanup_free_ char *subject = x ? name_oneline(sym_X509_get_subject_name(x)) : NULL;

                (void) asprintf_safe(ret_signer, "%s (%s)", strna(subject), strna(x ? cert_file(&c, x) : NULL));
        }
        r = 1;
finish:
        sym_OPENSSL_sk_free((OPENSSL_STACK *) signers);
        sym_BIO_free_all(data);
        sym_PKCS7_free(p7);
        sym_ERR_clear_error();
        return r;
}
