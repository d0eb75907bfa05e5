/* plugins/geometry/geometry_native.h: the geometry stages that only move pixels, run in
 * the frames' own format (geometry_native.c): pf_stage_desc's native_ok and run_native
 * for each stage. */
#ifndef PF_GEOMETRY_NATIVE_H
#define PF_GEOMETRY_NATIVE_H

#include "pipefuse/plugin.h"

int crop_native_ok(const void *params);
int crop_native(const pf_native_args *a);
int flip_native_ok(const void *params);
int flip_native(const pf_native_args *a);
int rotate_native_ok(const void *params); /* quarter turns only */
int rotate_native(const pf_native_args *a);
int pad_native_ok(const void *params);
int pad_native(const pf_native_args *a);
int resize_native_ok(const void *params); /* nearest only */
int resize_native(const pf_native_args *a);

#endif
