/* tests/cli/stall.c: an LD_PRELOAD library for batch_test.sh's section codectime. With
 * PF_TEST_STALL=decode, libpng's png_read_info waits forever; with PF_TEST_STALL=encode,
 * png_write_info does: a decode or an encode that hangs (a file on a hung network mount,
 * a stuck disk) where no plugin code runs, which --file-timeout must still end. Only the
 * worker process reads and writes PNGs, so the supervisor is never held. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <png.h>

static void stall_if(const char *step)
{
    const char *v = getenv("PF_TEST_STALL");
    if (v && strcmp(v, step) == 0)
        for (;;)
            pause();
}

void png_read_info(png_structrp png, png_inforp info)
{
    stall_if("decode");
    void (*real)(png_structrp, png_inforp) =
        (void (*)(png_structrp, png_inforp))dlsym(RTLD_NEXT, "png_read_info");
    real(png, info);
}

void png_write_info(png_structrp png, png_const_inforp info)
{
    stall_if("encode");
    void (*real)(png_structrp, png_const_inforp) =
        (void (*)(png_structrp, png_const_inforp))dlsym(RTLD_NEXT, "png_write_info");
    real(png, info);
}
