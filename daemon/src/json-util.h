/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Reading tuck's state files (JSON) without trusting them: a file that is
 * not there, too large, not JSON, truncated, or of the wrong shape gives an
 * error that names the file and what is wrong, and never a json-c assertion
 * (json_object_object_add() and json_object_array_*() abort on a value of
 * another type). Every access goes through a typed getter.
 */

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* No state file of ours comes near this: a 128-layer generation record is ~40 KiB. */
#define STATE_FILE_MAX (4u * 1024 * 1024)

/*
 * Parses the JSON object in @path. -ENOENT if there is none; -EFBIG, -EBADMSG
 * (not JSON, truncated, trailing data, not an object) or another -errno with
 * a reason in *ret_error ("not JSON: unexpected character at byte 12").
 */
int json_parse_file(const char *path, json_object **ret, char **ret_error);

/* The name of a JSON type for messages: "a string", "an object", "null". */
const char *json_type_description(json_object *o);

/*
 * The member @key of object @o with type @type. -ENOENT if it is missing
 * (or null and @type is not json_type_null), -EBADMSG with *ret_error
 * ("KEY: a number, expected a string") if it has another type.
 */
int json_member(json_object *o, const char *key, json_type type, json_object **ret, char **ret_error);

/* Optional members: a missing one leaves *ret untouched and returns 0. */
int json_member_string(json_object *o, const char *key, const char **ret, char **ret_error);
int json_member_uint64(json_object *o, const char *key, uint64_t *ret, char **ret_error);
int json_member_bool(json_object *o, const char *key, bool *ret, char **ret_error);
/* A NULL-terminated copy of an array of strings. */
int json_member_strv(json_object *o, const char *key, char ***ret, char **ret_error);

/* Prefixes *error with @where: "sysext.foo" + "floor: ..." is "sysext.foo.floor: ...", + "a number" "sysext.foo: a number". */
int json_error_prefix(char **error, const char *where);

/* Writes @o to @path atomically (write_file_atomic()). */
int json_save(const char *path, json_object *o);
/* json_parse_file() without the reason. */
int json_load(const char *path, json_object **ret);

/* Adds a string member, or null for NULL. */
int json_add_string(json_object *o, const char *key, const char *value);
