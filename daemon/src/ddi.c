/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <blkid/blkid.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <strings.h>
#include <stdlib.h>

#include "ddi.h"
#include "image.h"
#include "log.h"
#include "util.h"

/* GPT attribute bit 63: "do not mount automatically" (the specification's no-auto). */
#define GPT_FLAG_NO_AUTO (UINT64_C(1) << 63)
/* "Linux generic", the one partition type with no role: root when it is alone. */
#define GPT_LINUX_GENERIC "0fc63daf-8483-4772-8e79-3d69d8477de4"

typedef enum DdiRole {
        DDI_ROLE_DATA,
        DDI_ROLE_VERITY,
        DDI_ROLE_VERITY_SIG,
        _DDI_ROLE_MAX,
} DdiRole;

static const char * const role_suffix[_DDI_ROLE_MAX] = { "", "-verity", "-verity-sig" };

/* The Discoverable Partitions Specification's type UUIDs (systemd's sd-gpt.h). */
static const struct {
        const char *arch;
        const char *uuid[_DDI_DESIGNATOR_MAX][_DDI_ROLE_MAX];
} gpt_types[] = {
        { "alpha", {
          { "6523f8ae-3eb1-4e2a-a05a-18b695ae656f", "fc56d9e9-e6e5-4c06-be32-e74407ce09a5", "d46495b7-a053-414f-80f7-700c99921ef8" },
          { "e18cf08c-33ec-4c0d-8246-c6c6fb3da024", "8cce0d25-c0d0-4a44-bd87-46331bf1df67", "5c6e1c76-076a-457a-a0fe-f3b4cd21ce6e" } } },
        { "arc", {
          { "d27f46ed-2919-4cb8-bd25-9531f3c16534", "24b2d975-0f97-4521-afa1-cd531e421b8d", "143a70ba-cbd3-4f06-919f-6c05683a78bc" },
          { "7978a683-6316-4922-bbee-38bff5a2fecc", "fca0598c-d880-4591-8c16-4eda05c7347c", "94f9a9a1-9971-427a-a400-50cb297f0f35" } } },
        { "arm", {
          { "69dad710-2ce4-4e3c-b16c-21a1d49abed3", "7386cdf2-203c-47a9-a498-f2ecce45a2d6", "42b0455f-eb11-491d-98d3-56145ba9d037" },
          { "7d0359a3-02b3-4f0a-865c-654403e70625", "c215d751-7bcd-4649-be90-6627490a4c05", "d7ff812f-37d1-4902-a810-d76ba57b975a" } } },
        { "arm64", {
          { "b921b045-1df0-41c3-af44-4c6f280d3fae", "df3300ce-d69f-4c92-978c-9bfb0f38d820", "6db69de6-29f4-4758-a7a5-962190f00ce3" },
          { "b0e01050-ee5f-4390-949a-9101b17104e9", "6e11a4e7-fbca-4ded-b9e9-e1a512bb664e", "c23ce4ff-44bd-4b00-b2d4-b41b3419e02a" } } },
        { "ia64", {
          { "993d8d3d-f80e-4225-855a-9daf8ed7ea97", "86ed10d5-b607-45bb-8957-d350f23d0571", "e98b36ee-32ba-4882-9b12-0ce14655f46a" },
          { "4301d2a6-4e3b-4b2a-bb94-9e0b2c4225ea", "6a491e03-3be7-4545-8e38-83320e0ea880", "8de58bc2-2a43-460d-b14e-a76e4a17b47f" } } },
        { "loongarch64", {
          { "77055800-792c-4f94-b39a-98c91b762bb6", "f3393b22-e9af-4613-a948-9d3bfbd0c535", "5afb67eb-ecc8-4f85-ae8e-ac1e7c50e7d0" },
          { "e611c702-575c-4cbe-9a46-434fa0bf7e3f", "f46b2c26-59ae-48f0-9106-c50ed47f673d", "b024f315-d330-444c-8461-44bbde524e99" } } },
        { "mips-le", {
          { "37c58c8a-d913-4156-a25f-48b1b64e07f0", "d7d150d2-2a04-4a33-8f12-16651205ff7b", "c919cc1f-4456-4eff-918c-f75e94525ca5" },
          { "0f4868e9-9952-4706-979f-3ed3a473e947", "46b98d8d-b55c-4e8f-aab3-37fca7f80752", "3e23ca0b-a4bc-4b4e-8087-5ab6a26aa8a9" } } },
        { "mips64-le", {
          { "700bda43-7a34-4507-b179-eeb93d7a7ca3", "16b417f8-3e06-4f57-8dd2-9b5232f41aa6", "904e58ef-5c65-4a31-9c57-6af5fc7c5de7" },
          { "c97c1f32-ba06-40b4-9f22-236061b08aa8", "3c3d61fe-b5f3-414d-bb71-8739a694a4ef", "f2c2c7ee-adcc-4351-b5c6-ee9816b66e16" } } },
        { "parisc", {
          { "1aacdb3b-5444-4138-bd9e-e5c2239b2346", "d212a430-fbc5-49f9-a983-a7feef2b8d0e", "15de6170-65d3-431c-916e-b0dcd8393f25" },
          { "dc4a4480-6917-4262-a4ec-db9384949f25", "5843d618-ec37-48d7-9f12-cea8e08768b2", "450dd7d1-3224-45ec-9cf2-a43a346d71ee" } } },
        { "ppc", {
          { "1de3f1ef-fa98-47b5-8dcd-4a860a654d78", "98cfe649-1588-46dc-b2f0-add147424925", "1b31b5aa-add9-463a-b2ed-bd467fc857e7" },
          { "7d14fec5-cc71-415d-9d6c-06bf0b3c3eaf", "df765d00-270e-49e5-bc75-f47bb2118b09", "7007891d-d371-4a80-86a4-5cb875b9302e" } } },
        { "ppc64", {
          { "912ade1d-a839-4913-8964-a10eee08fbd2", "9225a9a3-3c19-4d89-b4f6-eeff88f17631", "f5e2c20c-45b2-4ffa-bce9-2a60737e1aaf" },
          { "2c9739e2-f068-46b3-9fd0-01c5a9afbcca", "bdb528a5-a259-475f-a87d-da53fa736a07", "0b888863-d7f8-4d9e-9766-239fce4d58af" } } },
        { "ppc64-le", {
          { "c31c45e6-3f39-412e-80fb-4809c4980599", "906bd944-4589-4aae-a4e4-dd983917446a", "d4a236e7-e873-4c07-bf1d-bf6cf7f1c3c6" },
          { "15bb03af-77e7-4d4a-b12b-c0d084f7491c", "ee2b9983-21e8-4153-86d9-b6901a54d1ce", "c8bfbd1e-268e-4521-8bba-bf314c399557" } } },
        { "riscv32", {
          { "60d5a7fe-8e7d-435c-b714-3dd8162144e1", "ae0253be-1167-4007-ac68-43926c14c5de", "3a112a75-8729-4380-b4cf-764d79934448" },
          { "b933fb22-5c3f-4f91-af90-e2bb0fa50702", "cb1ee4e3-8cd0-4136-a0a4-aa61a32e8730", "c3836a13-3137-45ba-b583-b16c50fe5eb4" } } },
        { "riscv64", {
          { "72ec70a6-cf74-40e6-bd49-4bda08e8f224", "b6ed5582-440b-4209-b8da-5ff7c419ea3d", "efe0f087-ea8d-4469-821a-4c2a96a8386a" },
          { "beaec34b-8442-439b-a40b-984381ed097d", "8f1056be-9b05-47c4-81d6-be53128e5b54", "d2f9000a-7a18-453f-b5cd-4d32f77a7b32" } } },
        { "s390", {
          { "08a7acea-624c-4a20-91e8-6e0fa67d23f9", "7ac63b47-b25c-463b-8df8-b4a94e6c90e1", "3482388e-4254-435a-a241-766a065f9960" },
          { "cd0f869b-d0fb-4ca0-b141-9ea87cc78d66", "b663c618-e7bc-4d6d-90aa-11b756bb1797", "17440e4f-a8d0-467f-a46e-3912ae6ef2c5" } } },
        { "s390x", {
          { "5eead9a9-fe09-4a1e-a1d7-520d00531306", "b325bfbe-c7be-4ab8-8357-139e652d2f6b", "c80187a5-73a3-491a-901a-017c3fa953e9" },
          { "8a4f5770-50aa-4ed3-874a-99b710db6fea", "31741cc4-1a2a-4111-a581-e00b447d2d06", "3f324816-667b-46ae-86ee-9b0c0c6c11b4" } } },
        { "tilegx", {
          { "c50cdd70-3862-4cc3-90e1-809a8c93ee2c", "966061ec-28e4-4b2e-b4a5-1f0a825a1d84", "b3671439-97b0-4a53-90f7-2d5a8f3ad47b" },
          { "55497029-c7c1-44cc-aa39-815ed1558630", "2fb4bf56-07fa-42da-8132-6b139f2026ae", "4ede75e2-6ccc-4cc8-b9c7-70334b087510" } } },
        { "x86", {
          { "44479540-f297-41b2-9af7-d131d5f0458a", "d13c5d3b-b5d1-422a-b29f-9454fdc89d76", "5996fc05-109c-48de-808b-23fa0830b676" },
          { "75250d76-8cc6-458e-bd66-bd47cc81a812", "8f461b0d-14ee-4e81-9aa9-049b6fb97abd", "974a71c0-de41-43c3-be5d-5c5ccd1ad2c0" } } },
        { "x86-64", {
          { "4f68bce3-e8cd-4db1-96e7-fbcaf984b709", "2c7357ed-ebd2-46d9-aec1-23d437ec2bf5", "41092b05-9fc8-4523-994f-2def0408b176" },
          { "8484680c-9521-48c6-9c11-b0720656f69e", "77ff5f63-e7b6-4633-acf4-1565b864c0e6", "e7bb33fb-06cf-4e81-8273-e543b413e2e2" } } },
};

static const char * const designator_table[_DDI_DESIGNATOR_MAX] = {
        [DDI_ROOT] = "root",
        [DDI_USR] = "usr",
};

const char *ddi_designator_to_string(DdiDesignator d) {
        return d >= 0 && d < _DDI_DESIGNATOR_MAX ? designator_table[d] : NULL;
}

const char *architecture_secondary(const char *arch) {
        if (streq_ptr(arch, "x86-64"))
                return "x86";
        if (streq_ptr(arch, "arm64"))
                return "arm";
        return NULL;
}

/* What a type UUID is for; false for a type with no role in an extension. */
static bool classify(const char *type, const char **ret_arch, DdiDesignator *ret_d, DdiRole *ret_role) {
        for (size_t i = 0; i < ELEMENTSOF(gpt_types); i++)
                for (DdiDesignator d = 0; d < _DDI_DESIGNATOR_MAX; d++)
                        for (DdiRole r = 0; r < _DDI_ROLE_MAX; r++)
                                if (strcasecmp(type, gpt_types[i].uuid[d][r]) == 0) {
                                        *ret_arch = gpt_types[i].arch;
                                        *ret_d = d;
                                        *ret_role = r;
                                        return true;
                                }
        return false;
}

static void partition_done(DdiPartition *p) {
        free(p->label);
        *p = (DdiPartition) {};
}

void ddi_done(Ddi *d) {
        partition_done(&d->data);
        partition_done(&d->verity);
        partition_done(&d->verity_sig);
        free(d->fstype);
        *d = (Ddi) {};
}

/* What the table holds, sorted by role: at most one candidate per slot, or why not. */
typedef struct Found {
        DdiPartition slot[_DDI_DESIGNATOR_MAX][_DDI_ROLE_MAX];   /* for the chosen architecture */
        int rank[_DDI_DESIGNATOR_MAX];       /* 2 native, 1 secondary: which arch filled the slots */
        DdiPartition generic;
        unsigned n_generic;
        char *foreign;                       /* "root-arm64": a partition for another architecture */
        char *duplicate;                     /* "root-x86-64 (partitions 1 and 3)" */
} Found;

static void found_done(Found *f) {
        for (DdiDesignator d = 0; d < _DDI_DESIGNATOR_MAX; d++)
                for (DdiRole r = 0; r < _DDI_ROLE_MAX; r++)
                        partition_done(&f->slot[d][r]);
        partition_done(&f->generic);
        free(f->foreign);
        free(f->duplicate);
}

static int partition_from_blkid(blkid_partition pp, uint64_t image_size, const char *arch, DdiPartition *ret,
                                char **ret_reason) {
        long long start = blkid_partition_get_start(pp), size = blkid_partition_get_size(pp);
        const char *uuid = blkid_partition_get_uuid(pp), *name = blkid_partition_get_name(pp);
        int nr = blkid_partition_get_partno(pp);

        if (start < 0 || size <= 0 || nr < 0)
                return -EIO;
        /* libblkid counts 512-byte sectors whatever the table's own sector size. */
        *ret = (DdiPartition) {
                .found = true,
                .partno = nr,
                .offset = (uint64_t) start * 512,
                .size = (uint64_t) size * 512,
                .architecture = arch,
        };
        if (uuid)
                snprintf(ret->uuid, sizeof(ret->uuid), "%s", uuid);
        for (char *c = ret->uuid; *c; c++)
                if (*c >= 'A' && *c <= 'F')
                        *c += 'a' - 'A';
        if (name && !(ret->label = strdup(name)))
                return -ENOMEM;
        if (ret->offset > image_size || ret->size > image_size - ret->offset) {
                (void) asprintf_safe(ret_reason, "partition %d ends at byte %" PRIu64 ", past the end of the "
                                     "image (%" PRIu64 " bytes): a truncated image?", nr, ret->offset + ret->size,
                                     image_size);
                return 0;
        }
        return 1;
}

/* Puts one partition of type (arch, d, role) into its slot: the native arch wins over the secondary. */
static int found_add(Found *f, const char *host_arch, const char *arch, DdiDesignator d, DdiRole role,
                     DdiPartition *p) {
        int rank = streq_ptr(arch, host_arch) ? 2 : streq_ptr(arch, architecture_secondary(host_arch)) ? 1 : 0;
        DdiPartition *slot = &f->slot[d][role];

        if (rank == 0) {
                if (!f->foreign && asprintf_safe(&f->foreign, "%s-%s%s", designator_table[d], arch,
                                                 role_suffix[role]) < 0)
                        return -ENOMEM;
                partition_done(p);
                return 0;
        }
        if (rank < f->rank[d] && role == DDI_ROLE_DATA) {
                partition_done(p);
                return 0;
        }
        if (slot->found && streq_ptr(slot->architecture, arch)) {
                if (!f->duplicate && asprintf_safe(&f->duplicate, "%s-%s%s (partitions %d and %d)",
                                                   designator_table[d], arch, role_suffix[role], slot->partno,
                                                   p->partno) < 0)
                        return -ENOMEM;
                partition_done(p);
                return 0;
        }
        if (role == DDI_ROLE_DATA && rank > f->rank[d]) {
                /* A better architecture: what the worse one had goes. */
                for (DdiRole r = 0; r < _DDI_ROLE_MAX; r++)
                        partition_done(&f->slot[d][r]);
                f->rank[d] = rank;
        }
        partition_done(slot);
        *slot = *p;
        *p = (DdiPartition) {};
        return 0;
}

static int collect(blkid_partlist pl, uint64_t image_size, const char *host_arch, Found *f, char **ret_reason) {
        int n = blkid_partlist_numof_partitions(pl);

        if (n < 0)
                return -EIO;
        for (int i = 0; i < n; i++) {
                blkid_partition pp = blkid_partlist_get_partition(pl, i);
                _cleanup_(partition_done) DdiPartition p = {};
                const char *type, *arch = NULL;
                DdiDesignator d = DDI_ROOT;
                DdiRole role = DDI_ROLE_DATA;
                bool generic;
                int r;

                if (!pp)
                        return -EIO;
                if (blkid_partition_get_flags(pp) & GPT_FLAG_NO_AUTO)
                        continue;
                type = blkid_partition_get_type_string(pp);
                generic = type && strcasecmp(type, GPT_LINUX_GENERIC) == 0;
                if (!type || (!generic && !classify(type, &arch, &d, &role)))
                        continue;   /* an ESP, swap, /home...: none of an extension's business */
                r = partition_from_blkid(pp, image_size, arch, &p, ret_reason);
                if (r <= 0)
                        return r;
                if (generic) {
                        if (f->n_generic++ == 0)
                                f->generic = TAKE_STRUCT(p);
                        continue;
                }
                r = found_add(f, host_arch, arch, d, role, &p);
                if (r < 0)
                        return r;
        }
        return 1;
}

/* Which partitions are the extension, or why none. */
static int choose(Found *f, const char *host_arch, Ddi *ret, char **ret_reason) {
        bool root = f->slot[DDI_ROOT][DDI_ROLE_DATA].found, usr = f->slot[DDI_USR][DDI_ROLE_DATA].found;
        const char *second = architecture_secondary(host_arch);
        DdiDesignator d;

        if (f->duplicate)
                return refuse_with(ret_reason, "two candidates for %s: tuck cannot tell which is the extension",
                              f->duplicate);
        if (root && usr)
                return refuse_with(ret_reason, "both a root and a usr partition: tuck maps one file system per image "
                              "(use one of them)");
        for (d = 0; d < _DDI_DESIGNATOR_MAX; d++) {
                bool data = f->slot[d][DDI_ROLE_DATA].found;

                if (!data && (f->slot[d][DDI_ROLE_VERITY].found || f->slot[d][DDI_ROLE_VERITY_SIG].found))
                        return refuse_with(ret_reason, "a %s%s partition without its %s partition", designator_table[d],
                                      f->slot[d][DDI_ROLE_VERITY].found ? "-verity" : "-verity-sig",
                                      designator_table[d]);
                if (f->slot[d][DDI_ROLE_VERITY_SIG].found && !f->slot[d][DDI_ROLE_VERITY].found)
                        return refuse_with(ret_reason, "a %s-verity-sig partition but no %s-verity partition",
                                      designator_table[d], designator_table[d]);
        }

        if (!root && !usr) {
                if (f->n_generic > 1)
                        return refuse_with(ret_reason, "two candidates: %u Linux generic partitions and no root or usr "
                                      "partition", f->n_generic);
                if (f->n_generic == 1) {
                        *ret = (Ddi) { .designator = DDI_ROOT, .data = TAKE_STRUCT(f->generic) };
                        return 1;
                }
                if (f->foreign)
                        return refuse_with(ret_reason, "built for another architecture: a %s partition, and none for "
                                      "this host's %s%s%s", f->foreign, strna(host_arch), second ? " or " : "",
                                      strempty(second));
                return refuse_with(ret_reason, "no root or usr partition for %s%s%s", strna(host_arch),
                              second ? " or " : "", strempty(second));
        }

        d = root ? DDI_ROOT : DDI_USR;
        *ret = (Ddi) {
                .designator = d,
                .data = TAKE_STRUCT(f->slot[d][DDI_ROLE_DATA]),
                .verity = TAKE_STRUCT(f->slot[d][DDI_ROLE_VERITY]),
                .verity_sig = TAKE_STRUCT(f->slot[d][DDI_ROLE_VERITY_SIG]),
        };
        return 1;
}

/*
 * The file system in the data partition, by its superblock. Only those tuck
 * mounts (squashfs, erofs) and those systemd-repart commonly puts in a DDI,
 * so that a refusal can name them, and what would make one ambiguous: tuck's
 * own probe runs none of libblkid's other superblock parsers (dozens).
 */
static const char * const partition_fstypes[] = {
        "squashfs", "erofs", "ext4", "xfs", "btrfs", "vfat", "f2fs", IMAGE_FOREIGN_SIGNATURES, NULL,
};

static int probe_fstype(int fd, const DdiPartition *p, char **ret) {
        blkid_probe pr = blkid_new_probe();
        const char *type = NULL;
        int r;

        if (!pr)
                return -ENOMEM;
        r = blkid_probe_set_device(pr, fd, (blkid_loff_t) p->offset, (blkid_loff_t) p->size) == 0 ? 0 : -EIO;
        if (r == 0) {
                blkid_probe_enable_superblocks(pr, 1);
                blkid_probe_set_superblocks_flags(pr, BLKID_SUBLKS_TYPE);
                if (blkid_probe_filter_superblocks_type(pr, BLKID_FLTR_ONLYIN, (char **) partition_fstypes) < 0)
                        r = -ENOMEM;
        }
        if (r == 0) {
                if (blkid_do_safeprobe(pr) == 0)
                        (void) blkid_probe_lookup_value(pr, "TYPE", &type, NULL);
                *ret = type ? strdup(type) : NULL;
                r = type && !*ret ? -ENOMEM : 0;
        }
        blkid_free_probe(pr);
        return r;
}

static int probe_table(blkid_probe pr, int fd, char **ret_reason) {
        const char *pttype = NULL;
        int r;

        if (blkid_probe_set_device(pr, fd, 0, 0) != 0)
                return -EIO;
        blkid_probe_enable_superblocks(pr, 0);
        blkid_probe_enable_partitions(pr, 1);
        blkid_probe_set_partitions_flags(pr, BLKID_PARTS_ENTRY_DETAILS);
        r = blkid_do_safeprobe(pr);
        if (r == -1)
                return -EIO;
        if (r == -2)
                return refuse_with(ret_reason, "ambiguous partition tables");
        if (r == 0)
                (void) blkid_probe_lookup_value(pr, "PTTYPE", &pttype, NULL);
        if (!pttype)
                return refuse_with(ret_reason, "no partition table");
        if (streq(pttype, "PMBR"))
                return refuse_with(ret_reason, "a protective MBR, but no valid GPT behind it (neither the primary nor "
                              "the backup header): a truncated or corrupt image");
        if (!streq(pttype, "gpt"))
                return refuse_with(ret_reason, "a '%s' partition table: tuck reads GPT disk images (DDIs) only", pttype);
        return 1;
}

int ddi_dissect(int fd, uint64_t size, const char *arch, Ddi *ret, char **ret_reason) {
        _cleanup_(found_done) Found f = {};
        blkid_partlist pl;
        blkid_probe pr;
        Ddi d = {};
        int r;

        pr = blkid_new_probe();
        if (!pr)
                return -ENOMEM;
        r = probe_table(pr, fd, ret_reason);
        if (r > 0) {
                errno = 0;
                pl = blkid_probe_get_partitions(pr);
                r = pl ? collect(pl, size, arch, &f, ret_reason) : (errno > 0 ? -errno : -EIO);
        }
        blkid_free_probe(pr);
        if (r > 0)
                r = choose(&f, arch, &d, ret_reason);
        if (r > 0) {
                r = probe_fstype(fd, &d.data, &d.fstype);
                if (r >= 0)
                        r = 1;
        }
        if (r <= 0) {
                ddi_done(&d);
                return r;
        }
        *ret = d;
        return 1;
}
