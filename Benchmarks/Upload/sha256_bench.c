/* SHA-256 of 64 MiB with the SHA extensions and with the portable rounds (Benchmarks/upload.sh). */
#include "logbook_sha256.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec/1e9;}
int main(void){ size_t n=64u<<20; unsigned char*b=malloc(n); for(size_t i=0;i<n;i++)b[i]=(unsigned char)(i*131);
 for(int portable=0;portable<2;portable++){ lb_sha256_use_portable(portable); double best=1e9;
  for(int r=0;r<5;r++){ lb_sha256 h; uint8_t d[32]; double t=now(); lb_sha256_init(&h); lb_sha256_update(&h,b,n); lb_sha256_final(&h,d); t=now()-t; if(t<best)best=t; }
  printf("%s: 64 MiB in %.3f s (best of 5) = %.0f MB/s\n", portable?"portable":(lb_sha256_accelerated()?"SHA extensions":"portable"), best, n/best/1e6);}
 return 0;}
