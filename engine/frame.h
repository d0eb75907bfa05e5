/* engine/frame.h: conversions between frame formats and the float RGBA working format.
 * Gray expands to (g, g, g, 1), gray+alpha to (g, g, g, a), RGB to (r, g, b, 1).
 * Back to gray takes the Rec. 709 luma (which is g again for gray pixels); integer
 * samples round to nearest and clamp; NaN becomes 0. */
#ifndef PF_FRAME_H
#define PF_FRAME_H

#include "internal.h"

void pf_row_to_float4(const void *row, pf_sample s, int channels, int n, pf_float4 *out);
void pf_row_from_float4(const pf_float4 *in, int n, void *row, pf_sample s, int channels);

#endif
