/* tests/jpeg/jpeg_splice.c: the metadata nvJPEG's encoder output gets (pf_jpeg_splice_meta,
 * engine/jpeg_meta.c, compiled in), checked on the CPU on streams libjpeg wrote:
 *
 * - EXIF and a profile of two APP2 segments: both read back byte for byte, the EXIF
 *   first after SOI in place of the JFIF marker, the pixels unchanged;
 * - a profile alone follows the JFIF marker; EXIF alone; a stream without JFIF;
 * - a gray frame's stream does not take an RGB profile.
 */
#include <stdlib.h>
#include <string.h>

#include "jpeg_internal.h"
#include "jpeg_make.h"
#include "testutil.h"

static unsigned char icc[70000];
static const unsigned char exif[] = {'I', 'I', 42, 0, 8, 0, 0, 0, 1, 0, 0x12, 1, 3,
                                     0,   1,   0,  0, 0, 6, 0, 0, 0, 0, 0,    0, 0};

static void one(const char *what, const jm_opts *o, int with_icc, int with_exif)
{
    size_t n;
    unsigned char *j = jm_make(o, &n);
    char err[256];
    pf_jpeg_meta *m = NULL, *back = NULL;
    CHECK(pf_jpeg_meta_new(with_icc ? icc : NULL, with_icc ? sizeof icc : 0,
                           with_exif ? exif : NULL, with_exif ? sizeof exif : 0, &m, err,
                           sizeof err) == PF_OK);
    int ch = o->space == 1 ? 1 : 3;
    unsigned char *b = NULL;
    size_t bn = 0;
    CHECK(pf_jpeg_splice_meta(j, n, m, ch, &b, &bn) == PF_OK);
    pf_jpeg_read_opts keep = {sizeof keep, 0, 0, 1};
    pf_frame a, f;
    pf_jpeg_info info;
    int st = pf_jpeg_read_memory(b, bn, what, &keep, &f, &info, &back, err, sizeof err);
    CHECKF(st == PF_OK, "%s: %s", what, err);
    CHECK(pf_jpeg_read_memory(j, n, "plain", &keep, &a, NULL, NULL, err, sizeof err) == PF_OK);
    if (st == PF_OK) {
        CHECKF(pf_test_frame_mismatches(&a, &f) == 0, "%s: the pixels changed", what);
        const void *d;
        size_t dn;
        int want_icc = with_icc && ch == 3;
        CHECKF(pf_jpeg_meta_icc(back, &d, &dn) == want_icc &&
                   (!want_icc || (dn == sizeof icc && memcmp(d, icc, dn) == 0)),
               "%s: the profile", what);
        if (o->orientation && !with_exif) /* the stream's own EXIF stays */
            CHECKF(pf_jpeg_meta_exif(back, NULL, NULL) == 1 && info.orientation == 1,
                   "%s: the stream's EXIF", what);
        else
            CHECKF(pf_jpeg_meta_exif(back, &d, &dn) == with_exif &&
                       (!with_exif || (dn == sizeof exif && memcmp(d, exif, dn) == 0)) &&
                       info.orientation == (with_exif ? 6 : 1),
                   "%s: the EXIF", what);
        if (with_exif) /* APP1 right after SOI */
            CHECKF(b[2] == 0xFF && b[3] == 0xE1, "%s: EXIF is not first", what);
        else if (j[2] == 0xFF && j[3] == 0xE0) /* JFIF kept first */
            CHECKF(b[2] == 0xFF && b[3] == 0xE0, "%s: JFIF is not first", what);
        pf_frame_free(&f);
    }
    pf_frame_free(&a);
    pf_jpeg_meta_free(back);
    pf_jpeg_meta_free(m);
    free(b);
    free(j);
}

int main(void)
{
    if (!pf_jpeg_available())
        return PF_TEST_SKIPPED;
    for (size_t i = 0; i < sizeof icc; i++)
        icc[i] = (unsigned char)(i * 13 + 5);
    icc[0] = 0, icc[1] = 1, icc[2] = 0x11, icc[3] = 0x70; /* 70000 */
    memcpy(icc + 16, "RGB ", 4);
    memcpy(icc + 36, "acsp", 4);
    jm_opts rgb = {.w = 40, .h = 30, .space = 3, .seed = 1};
    jm_opts gray = {.w = 40, .h = 30, .space = 1, .seed = 2};
    jm_opts nojfif = {.w = 24, .h = 16, .space = 3, .orientation = 1, .seed = 3};
    one("both", &rgb, 1, 1);
    one("profile", &rgb, 1, 0);
    one("exif", &rgb, 0, 1);
    one("gray", &gray, 1, 1);
    one("no JFIF", &nojfif, 1, 0);
    return pf_test_done("jpeg_splice");
}
