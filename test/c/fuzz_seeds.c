/* fuzz_seeds.c — writes a few encoded fixture profiles (raw and gzipped) into
 * the directory given, as the fuzzer's starting corpus. */
#include <stdio.h>

#include "fixture.h"
#include "pprof_encode.h"

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: fuzz_seeds DIR\n");
        return 2;
    }
    static const size_t sizes[] = {0, 1, 5, 40};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        hk_profile *p = fixture_profile((uint32_t)i + 1, sizes[i]);
        for (int gzip = 0; gzip < 2; gzip++) {
            char path[4096];
            snprintf(path, sizeof(path), "%s/seed-%zu%s", argv[1], sizes[i], gzip ? ".pb.gz" : ".pb");
            hk_buf b = fixture_encode(p, gzip);
            FILE *f = fopen(path, "wb");
            if (!f || fwrite(b.data, 1, b.len, f) != b.len || fclose(f) != 0) {
                perror(path);
                return 1;
            }
            hk_buf_free(&b);
        }
        hk_profile_free(p);
    }
    return 0;
}
