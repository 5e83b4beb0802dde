/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * GPT disk images (DDIs) per the Discoverable Partitions Specification, as
 * systemd-sysext reads them (src/shared/dissect-image.c): the extension is
 * the root or usr partition for the host's architecture (else its secondary
 * one: x86 on x86-64, arm on arm64), with optional -verity (the hash tree)
 * and -verity-sig (a JSON object with the root hash and its PKCS#7
 * signature) partitions of the same architecture. A lone "Linux generic"
 * partition serves as root, as systemd's DISSECT_IMAGE_GENERIC_ROOT allows.
 * Partitions marked no-auto (GPT attribute 63) are ignored.
 *
 * The table is read with libblkid; nothing is mapped here. The result says
 * where the file system and its verity data lie in the image file, to map by
 * offset and size on a loop device of their own (no partition scanning).
 *
 * Stricter than systemd, each refused with the reason: two candidates for
 * one role (systemd picks the newest label), a root and a usr partition
 * together (systemd mounts both: tuck maps one file system), a partition
 * past the end of the file (a truncated image), MBR tables.
 */

#include <stdbool.h>
#include <stdint.h>

typedef enum DdiDesignator {
        DDI_ROOT,
        DDI_USR,
        _DDI_DESIGNATOR_MAX,
} DdiDesignator;

typedef struct DdiPartition {
        bool found;
        int partno;
        uint64_t offset, size;        /* bytes into the image file */
        char uuid[37];                /* the partition's own UUID, lower case */
        char *label;
        const char *architecture;     /* systemd's name; NULL for a generic partition */
} DdiPartition;

typedef struct Ddi {
        DdiDesignator designator;     /* root: the tree holds usr/...; usr: it is /usr itself */
        DdiPartition data, verity, verity_sig;
        char *fstype;                 /* of the data partition, by libblkid */
} Ddi;

const char *ddi_designator_to_string(DdiDesignator d);

/*
 * Reads the partition table of the image file open at fd (size bytes) for
 * a host of architecture arch. Returns 1 and the partitions, 0 and a reason
 * if the image is no usable DDI, or a negative errno.
 */
int ddi_dissect(int fd, uint64_t size, const char *arch, Ddi *ret, char **ret_reason);
void ddi_done(Ddi *d);

/* The architecture systemd would use as this one's secondary (x86 for x86-64), or NULL. */
const char *architecture_secondary(const char *arch);
