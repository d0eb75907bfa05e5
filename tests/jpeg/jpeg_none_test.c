/* tests/jpeg/jpeg_none_test.c: a build without libjpeg: the JPEG functions exist and say
 * PF_UNSUPPORTED, naming the cause; the test then reports itself skipped. */
#include <string.h>

#include "pipefuse/jpeg.h"
#include "testutil.h"

int main(void)
{
    pf_frame f;
    char err[256] = "";
    CHECK(!pf_jpeg_available());
    CHECK(pf_jpeg_read("x.jpg", NULL, &f, NULL, NULL, err, sizeof err) == PF_UNSUPPORTED &&
          strstr(err, "libjpeg") && f.data == NULL);
    if (pf_test_failures)
        return pf_test_done("jpeg (no libjpeg)");
    fprintf(stderr, "built without libjpeg: skipped\n");
    return PF_TEST_SKIPPED;
}
