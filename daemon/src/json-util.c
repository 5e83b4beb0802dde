/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <fcntl.h>
#include <stdlib.h>

#include "json-util.h"
#include "util.h"

int json_parse_file(const char *path, json_object **ret, char **ret_error) {
        _cleanup_free_ char *text = NULL;
        json_tokener *tok;
        json_object *o;
        enum json_tokener_error e;
        size_t end;
        int n;

        n = read_full_file_at(AT_FDCWD, path, STATE_FILE_MAX, &text);
        if (n == -ENOENT)
                return n;
        if (n == -EFBIG) {
                (void) asprintf_safe(ret_error, "larger than %u MiB: not a state file of ours",
                                     STATE_FILE_MAX / 1024 / 1024);
                return n;
        }
        if (n == -EBADMSG) {
                (void) asprintf_safe(ret_error, "contains a NUL byte: not JSON");
                return n;
        }
        if (n < 0) {
                (void) asprintf_safe(ret_error, "cannot read: %s", strerror(-n));
                return n;
        }

        tok = json_tokener_new();
        if (!tok)
                return -ENOMEM;
        o = json_tokener_parse_ex(tok, text, n);
        e = json_tokener_get_error(tok);
        end = json_tokener_get_parse_end(tok);
        json_tokener_free(tok);
        if (e == json_tokener_continue || (!o && e == json_tokener_success)) {
                json_object_put(o);
                (void) asprintf_safe(ret_error, n == 0 ? "empty" : "truncated: the JSON ends early (%d bytes)", n);
                return -EBADMSG;
        }
        if (e != json_tokener_success) {
                (void) asprintf_safe(ret_error, "not JSON: %s at byte %zu", json_tokener_error_desc(e), end);
                return -EBADMSG;
        }
        if (text[end + strspn(text + end, " \t\r\n")] != 0) {
                json_object_put(o);
                (void) asprintf_safe(ret_error, "not JSON: data after the end of the object at byte %zu", end);
                return -EBADMSG;
        }
        if (!json_object_is_type(o, json_type_object)) {
                (void) asprintf_safe(ret_error, "%s, expected an object", json_type_description(o));
                json_object_put(o);
                return -EBADMSG;
        }
        *ret = o;
        return 0;
}

/* "a string": a JSON type as a message says it. */
static const char *type_name(json_type t) {
        switch (t) {
        case json_type_null:
                return "null";
        case json_type_boolean:
                return "a boolean";
        case json_type_double:
        case json_type_int:
                return "a number";
        case json_type_object:
                return "an object";
        case json_type_array:
                return "an array";
        case json_type_string:
                return "a string";
        }
        return "something else";
}

const char *json_type_description(json_object *o) {
        return type_name(json_object_get_type(o));
}

int json_member(json_object *o, const char *key, json_type type, json_object **ret, char **ret_error) {
        json_object *v;

        if (!json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, key, &v) ||
            (!v && type != json_type_null))
                return -ENOENT;
        if (!json_object_is_type(v, type)) {
                (void) asprintf_safe(ret_error, "%s: %s, expected %s", key, json_type_description(v), type_name(type));
                return -EBADMSG;
        }
        *ret = v;
        return 0;
}

int json_member_string(json_object *o, const char *key, const char **ret, char **ret_error) {
        json_object *v;
        int r = json_member(o, key, json_type_string, &v, ret_error);

        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return r;
        *ret = json_object_get_string(v);
        return 0;
}

int json_member_uint64(json_object *o, const char *key, uint64_t *ret, char **ret_error) {
        json_object *v;
        int r = json_member(o, key, json_type_int, &v, ret_error);

        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return r;
        /* json-c keeps a negative number as int64: refuse it rather than wrap it. */
        if (json_object_get_int64(v) < 0) {
                (void) asprintf_safe(ret_error, "%s: negative, expected a number >= 0", key);
                return -EBADMSG;
        }
        *ret = json_object_get_uint64(v);
        return 0;
}

int json_member_bool(json_object *o, const char *key, bool *ret, char **ret_error) {
        json_object *v;
        int r = json_member(o, key, json_type_boolean, &v, ret_error);

        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return r;
        *ret = json_object_get_boolean(v);
        return 0;
}

int json_member_strv(json_object *o, const char *key, char ***ret, char **ret_error) {
        _cleanup_strv_free_ char **l = calloc(1, sizeof(char *));
        json_object *a;
        size_t n;
        int r;

        if (!l)
                return -ENOMEM;
        r = json_member(o, key, json_type_array, &a, ret_error);
        if (r == -ENOENT) {
                *ret = TAKE_PTR(l);
                return 0;
        }
        if (r < 0)
                return r;
        n = json_object_array_length(a);
        for (size_t i = 0; i < n; i++) {
                json_object *s = json_object_array_get_idx(a, i);

                if (!json_object_is_type(s, json_type_string)) {
                        (void) asprintf_safe(ret_error, "%s[%zu]: %s, expected a string", key, i,
                                             json_type_description(s));
                        return -EBADMSG;
                }
                if (strv_extend(&l, json_object_get_string(s)) < 0)
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(l);
        return 0;
}

int json_error_prefix(char **error, const char *where) {
        size_t n;
        char *s;

        if (!*error)
                return 0;
        /* "floor: a number..." is about a member: "sysext.foo.floor: ..."; "a number, ..." about @where. */
        n = strspn(*error, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-");
        s = strjoin(where, n > 0 && strchr(":[.", (*error)[n]) && (*error)[n] ? "." : ": ", *error);
        if (!s)
                return -ENOMEM;
        free(*error);
        *error = s;
        return 0;
}

int json_add_string(json_object *o, const char *key, const char *value) {
        return json_object_object_add(o, key, value ? json_object_new_string(value) : NULL);
}

int json_save(const char *path, json_object *o) {
        const char *text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE);
        _cleanup_free_ char *with_newline = text ? strjoin(text, "\n") : NULL;

        if (!with_newline)
                return -ENOMEM;
        return write_file_atomic(path, with_newline, 0644);
}

int json_load(const char *path, json_object **ret) {
        _cleanup_free_ char *error = NULL;

        return json_parse_file(path, ret, &error);
}
