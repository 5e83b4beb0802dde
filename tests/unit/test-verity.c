/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * How an image is protected (dissect.c, verity.c, signature.c) and whether
 * ImagePolicy= takes it (image-policy.c), decided from the files of the
 * image corpus alone (tests/corpus/mkcorpus: systemd-repart, veritysetup,
 * openssl): sidecars, the verity-sig partition, the four ways a signature
 * is bad, root hashes that disagree, and the policy's words.
 */

#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config.h"
#include "crypto-dl.h"
#include "image.h"
#include "signature.h"
#include "tap.h"
#include "util.h"

static const char *corpus;
static char *corpus_root;        /* its root/: /etc/verity.d holds the test CA */

static Image *image(const char *name) {
        Image *i = calloc(1, sizeof(Image));
        const char *dot = strchr(name, '.');

        if (!i)
                return NULL;
        i->class = IMAGE_SYSEXT;
        i->name = dot ? strndup(name, dot - name) : strdup(name);
        if (asprintf_safe(&i->path, "%s/%s.raw", corpus, name) < 0 || !(i->resolved = strdup(i->path))) {
                image_free(i);
                return NULL;
        }
        (void) image_probe_type(i->path, &i->type, &i->fstype);
        i->inspected = i->valid = true;
        return i;
}

static const struct {
        const char *image;
        bool valid;
        ImageProtection protection;
        const char *detail;       /* in root_hash_from / signer if valid, in the reason if not */
} cases[] = {
        { "c-squashfs", true, IMAGE_PROTECTION_UNPROTECTED, NULL },
        { "c-ddi-root", true, IMAGE_PROTECTION_UNPROTECTED, NULL },
        { "c-ddi-verity", true, IMAGE_PROTECTION_UNPROTECTED, NULL },   /* a hash tree, no root hash */
        { "c-verity", true, IMAGE_PROTECTION_VERITY, "c-verity.roothash" },
        { "c-ddi-verity-hash", true, IMAGE_PROTECTION_VERITY, "c-ddi-verity-hash.roothash" },
        { "c-signed", true, IMAGE_PROTECTION_SIGNED, "c-signed.roothash" },
        { "c-ddi-signed", true, IMAGE_PROTECTION_SIGNED, "the verity-sig partition" },
        { "c-ddi-usr-signed", true, IMAGE_PROTECTION_SIGNED, "the verity-sig partition" },
        { "c-ddi-signed-hash", true, IMAGE_PROTECTION_SIGNED, "c-ddi-signed-hash.roothash" },
        { "c-ddi-ext4", false, 0, "holds file system 'ext4': tuck mounts squashfs and erofs only" },
        { "r-ddi-two", false, 0, "two candidates" },
        { "r-ddi-disagree", false, 0, "r-ddi-disagree.roothash' is not this image's" },
        { "r-ddi-unknown", false, 0, "from the verity-sig partition: signed by a certificate not in verity.d "
          "(issuer /CN=some other key" },
        { "r-sig-unknown", false, 0, "signed by a certificate not in verity.d (issuer /CN=some other key" },
        { "r-sig-impostor", false, 0, "does not verify with the certificate it names (issuer /CN=tuck test "
          "signing key, serial 1092): made with another key, or corrupt" },
        { "r-sig-corrupt", false, 0, "made with another key, or corrupt" },
        { "r-sig-other", false, 0, "is over another root hash" },
        { "r-no-tree", false, 0, "but no hash tree (no NAME.verity)" },
};

static void test_dissect(void) {
        for (size_t k = 0; k < ELEMENTSOF(cases); k++) {
                _cleanup_(image_freep) Image *i = image(cases[k].image);
                int r;

                if (!tap_ok(i != NULL, "%s: found", cases[k].image))
                        continue;
                r = image_dissect(i, corpus_root, "x86-64");
                if (!tap_ok(r >= 0 && i->valid == cases[k].valid, "%s: %s", cases[k].image,
                            cases[k].valid ? "usable" : "refused")) {
                        tap_diag("r=%d, reason '%s'", r, tap_str(i->reason));
                        continue;
                }
                if (!cases[k].valid) {
                        tap_ok(i->reason && strstr(i->reason, cases[k].detail), "%s: says why (%s)", cases[k].image,
                               tap_str(i->reason));
                        continue;
                }
                tap_streq(image_protection_to_string(i->protection), image_protection_to_string(cases[k].protection),
                          "%s: %s", cases[k].image, image_protection_to_string(cases[k].protection));
                if (cases[k].detail)
                        tap_ok(i->verity.root_hash_from && strstr(i->verity.root_hash_from, cases[k].detail),
                               "%s: the root hash from %s", cases[k].image, tap_str(i->verity.root_hash_from));
                if (cases[k].protection == IMAGE_PROTECTION_SIGNED)
                        tap_ok(i->signer && strstr(i->signer, "tuck test signing key") &&
                               strstr(i->signer, "verity.d/tuck-test.crt"), "%s: signed by the test CA (%s)",
                               cases[k].image, tap_str(i->signer));
        }
}

/* A signed image on a host whose verity.d is empty: nothing to check it against, refused. */
static void test_no_certificates(void) {
        _cleanup_(image_freep) Image *i = image("c-signed");
        int r = i ? image_dissect(i, "/nonexistent-tuck-root", "x86-64") : -ENOMEM;

        tap_ok(r == 0 && i && !i->valid && i->reason && strstr(i->reason, "no certificate in verity.d"),
               "signed, and verity.d empty: refused (%s)", i ? tap_str(i->reason) : "");
}

/* The DDI's root hash and one given beside it must agree (systemd: "doesn't match configured hash"). */
static void test_disagree(void) {
        _cleanup_(image_freep) Image *i = image("c-ddi-signed");
        _cleanup_free_ char *reason = NULL;
        _cleanup_close_ int fd = -EBADF;
        ImageVerity v = { .root_hash = calloc(1, 32), .root_hash_size = 32, .root_hash_from = strdup("'x.roothash'") };
        Ddi d = {};
        int r = -ENOMEM;

        struct stat st;

        fd = i ? open(i->path, O_RDONLY | O_CLOEXEC) : -EBADF;
        if (fd >= 0 && fstat(fd, &st) == 0 && ddi_dissect(fd, (uint64_t) st.st_size, "x86-64", &d, &reason) == 1 &&
            v.root_hash)
                r = verity_load_sig_partition(fd, &d.verity_sig, &v, &reason);
        tap_ok(r == 0 && reason && strstr(reason, "is not the one in 'x.roothash'"),
               "a root hash from the verity-sig partition that disagrees with a sidecar's: refused (%s)",
               tap_str(reason));
        ddi_done(&d);
        image_verity_done(&v);
}

static void test_policy(void) {
        static const struct {
                const char *s;
                int r;
                const char *canonical;
        } words[] = {
                { "signed", 0, "signed" },
                { "signed+verity+unprotected+absent", 0, "signed+verity+unprotected+absent" },
                { "unprotected+signed", 0, "signed+unprotected" },
                { "*", 0, "signed+verity+unprotected+absent" },
                { "absent", 0, "absent" },
                { "", -EINVAL, NULL },
                { "signed+encrypted", -EINVAL, NULL },
                { "Signed", -EINVAL, NULL },
        };
        static const struct {
                const char *policy;
                ImageProtection p;
                bool allowed;
        } decisions[] = {
                { "signed", IMAGE_PROTECTION_SIGNED, true },
                { "signed", IMAGE_PROTECTION_VERITY, false },
                { "signed", IMAGE_PROTECTION_UNPROTECTED, false },
                { "verity", IMAGE_PROTECTION_SIGNED, true },
                { "verity", IMAGE_PROTECTION_VERITY, true },
                { "verity", IMAGE_PROTECTION_UNPROTECTED, false },
                { "signed+unprotected", IMAGE_PROTECTION_VERITY, true },
                { "unprotected", IMAGE_PROTECTION_SIGNED, true },
                { "absent", IMAGE_PROTECTION_SIGNED, false },
                { "*", IMAGE_PROTECTION_UNPROTECTED, true },
        };
        char buf[64];

        for (size_t k = 0; k < ELEMENTSOF(words); k++) {
                ImagePolicy p = 0;
                int r = image_policy_from_string(words[k].s, &p);

                tap_ok(r == words[k].r && (r < 0 || streq(image_policy_to_string(p, buf), words[k].canonical)),
                       "ImagePolicy=%s: %s", words[k].s, r < 0 ? "refused" : words[k].canonical);
        }
        for (size_t k = 0; k < ELEMENTSOF(decisions); k++) {
                ImagePolicy p = 0;

                (void) image_policy_from_string(decisions[k].policy, &p);
                tap_ok(image_policy_allows(p, decisions[k].p) == decisions[k].allowed, "ImagePolicy=%s %s a %s image",
                       decisions[k].policy, decisions[k].allowed ? "takes" : "refuses",
                       image_protection_to_string(decisions[k].p));
        }
        tap_ok(image_policy_allows(IMAGE_POLICY_DEFAULT, IMAGE_PROTECTION_UNPROTECTED),
               "the default takes unprotected images (systemd's for /var/lib/extensions)");
}

/* What image_check_policy() says about the corpus's images under ImagePolicy=signed. */
static void test_check_policy(void) {
        static const struct {
                const char *image;
                const char *reason;     /* NULL: allowed */
        } cases2[] = {
                { "c-signed", NULL },
                { "c-verity", "dm-verity, but its root hash is not signed, and ImagePolicy=signed asks for more" },
                { "c-squashfs", "not protected by dm-verity, and ImagePolicy=signed asks for more" },
                { "c-ddi-verity", "not protected by dm-verity, and ImagePolicy=signed asks for more: a hash tree but "
                  "no root hash" },
        };
        ImagePolicy signed_only = 0;

        (void) image_policy_from_string("signed", &signed_only);
        for (size_t k = 0; k < ELEMENTSOF(cases2); k++) {
                _cleanup_(image_freep) Image *i = image(cases2[k].image);
                int r = i && image_dissect(i, corpus_root, "x86-64") > 0 ? image_check_policy(i, signed_only) : -1;

                if (!cases2[k].reason)
                        tap_ok(r == 1, "ImagePolicy=signed takes %s", cases2[k].image);
                else
                        tap_ok(r == 0 && i->reason && strstr(i->reason, cases2[k].reason),
                               "ImagePolicy=signed refuses %s (%s)", cases2[k].image, i ? tap_str(i->reason) : "");
        }
}

static void test_config(void) {
        char path[] = "/tmp/tuck-test-conf-XXXXXX";
        _cleanup_free_ char *error = NULL;
        TuckConfig c;
        FILE *f;
        int fd, r;

        fd = mkstemp(path);
        f = fd >= 0 ? fdopen(fd, "w") : NULL;
        if (!tap_ok(f != NULL, "temporary tuck.conf"))
                return;
        fputs("[Sysext]\nImagePolicy=signed\n[Confext]\nImagePolicy=verity+signed\n", f);
        fclose(f);
        r = config_load(&c, path, &error);
        tap_ok(r == 0 && c.image_policy[IMAGE_SYSEXT] == 1u << IMAGE_PROTECTION_SIGNED &&
               c.image_policy[IMAGE_CONFEXT] == ((1u << IMAGE_PROTECTION_SIGNED) | (1u << IMAGE_PROTECTION_VERITY)),
               "tuck.conf: ImagePolicy= per class");
        if (r == 0)
                config_done(&c);

        f = fopen(path, "we");
        if (f) {
                fputs("[Sysext]\nImagePolicy=signed+sealed\n", f);
                fclose(f);
        }
        r = config_load(&c, path, &error);
        tap_ok(r == -EINVAL && error && strstr(error, "line 2: ImagePolicy= takes"), "an unknown word is refused (%s)",
               tap_str(error));
        (void) unlink(path);

        r = config_load(&c, "/nonexistent/tuck.conf", NULL);
        tap_ok(r == 0 && c.image_policy[IMAGE_SYSEXT] == IMAGE_POLICY_DEFAULT, "no tuck.conf: the default policy");
        if (r == 0)
                config_done(&c);
}

/*
 * In a child that has left the process's mount namespace, or its root: the
 * load is refused with its reason, and nothing is loaded. tuck enters the
 * staging namespace and chroots into staged images; a library found there
 * must never run.
 */
static void refused_in_child(const char *where, int (*leave)(void)) {
        pid_t pid = fork();
        int status = 0;

        if (pid == 0) {
                _cleanup_free_ char *why = NULL;

                if (leave() < 0)
                        _exit(2);
                if (dlopen_libcrypto(&why) != 0 || libcrypto_loaded() || !why || !strstr(why, "is not loaded here"))
                        _exit(1);
                free(why);
                why = NULL;
                _exit(dlopen_libcryptsetup(&why) == 0 && !libcryptsetup_loaded() && why ? 0 : 1);
        }
        if (pid < 0 || waitpid(pid, &status, 0) != pid)
                status = -1;
        tap_ok(status == 0, "libcrypto and libcryptsetup are not loaded %s (child's wait status %d)", where, status);
}

/* A mount namespace of its own (with a user namespace where that is what it takes). */
static int leave_namespace(void) {
        return unshare(CLONE_NEWNS) == 0 || unshare(CLONE_NEWUSER | CLONE_NEWNS) == 0 ? 0 : -errno;
}

/* Another root, in the same mount namespace (a user namespace grants CAP_SYS_CHROOT). */
static int leave_root(void) {
        if (chroot(corpus_root) < 0 && (unshare(CLONE_NEWUSER) < 0 || chroot(corpus_root) < 0))
                return -errno;
        return chdir("/") < 0 ? -errno : 0;
}

static void test_loading(void) {
        _cleanup_free_ char *why = NULL;

        tap_ok(!libcrypto_loaded() && !libcryptsetup_loaded(), "nothing is loaded before it is needed");
        refused_in_child("in another mount namespace", leave_namespace);
        refused_in_child("below another root", leave_root);
        tap_ok(dlopen_libcrypto(&why) == 1 && libcrypto_loaded(), "libcrypto is loaded where the process started%s%s",
               why ? ": " : "", strempty(why));
        tap_ok(dlopen_libcryptsetup(&why) == 1 && libcryptsetup_loaded(), "and so is libcryptsetup%s%s",
               why ? ": " : "", strempty(why));
}

int main(void) {
        corpus = getenv("TUCK_CORPUS");
        if (!corpus) {
                printf("Bail out! TUCK_CORPUS is not set (meson sets it: tests/corpus)\n");
                return 1;
        }
        corpus_root = path_join(corpus, "root");
        test_loading();
        test_dissect();
        test_no_certificates();
        test_disagree();
        test_policy();
        test_check_policy();
        test_config();
        free(corpus_root);
        return tap_done();
}
