// Is the VM's "slow state" a hidden SMT sibling, or time? (1) a time series of a fixed loop on one
// CPU alone; (2) the same loop on CPU i while CPU j spins (pause loop) or computes, for all pairs.
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <immintrin.h>
static double now(clockid_t c){struct timespec t;clock_gettime(c,&t);return t.tv_sec*1e6+t.tv_nsec/1e3;}
static void pin(int cpu){cpu_set_t s;CPU_ZERO(&s);CPU_SET(cpu,&s);pthread_setaffinity_np(pthread_self(),sizeof s,&s);}
static volatile unsigned long sink;
static void work(long n){unsigned long x=1;for(long i=0;i<n;i++){x=x*6364136223846793005ul+1442695040888963407ul;x^=x>>13;}sink=x;}
static atomic_int stop_flag; static atomic_int mode;
static void* spinner(void* a){pin((int)(long)a);while(!atomic_load(&stop_flag)){if(atomic_load(&mode)==0)_mm_pause();else work(1000);}return 0;}
static int cmp(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
static double med(double*v,int n){qsort(v,n,sizeof*v,cmp);return v[n/2];}
int main(int argc,char**argv){
  int ncpu=16; pin(2);
  long n=100000; double t0=now(CLOCK_MONOTONIC); work(n); double t=now(CLOCK_MONOTONIC)-t0;
  n=(long)(n*1000.0/t); // ~1 ms
  for(int k=0;k<5;k++){double a=now(CLOCK_MONOTONIC);work(n);double b=now(CLOCK_MONOTONIC)-a; if(b>0) n=(long)(n*1000.0/b);} 
  printf("calibrated n=%ld for 1 ms on cpu 2\n",n);
  // (1) time series, 3 CPUs x 2000 samples, print the per-100 median and the fraction > 1.5 ms
  for(int c=0;c<ncpu;c+=5){pin(c);double v[100];printf("series cpu %d:",c);
    for(int blk=0;blk<20;blk++){int slow=0;for(int i=0;i<100;i++){double a=now(CLOCK_MONOTONIC);work(n);v[i]=now(CLOCK_MONOTONIC)-a;if(v[i]>1500)slow++;}printf(" %.0f/%d",med(v,100),slow);}printf("\n");}
  // (2) pair matrix, spinner pausing (mode 0) and computing (mode 1): median of 15 loops, in us
  for(int m=0;m<2;m++){atomic_store(&mode,m);printf("matrix mode %s (rows: work cpu, cols: other cpu)\n",m?"compute":"pause");
    for(int i=0;i<ncpu;i++){printf("%2d:",i);for(int j=0;j<ncpu;j++){if(i==j){printf("    -");continue;}
      atomic_store(&stop_flag,0);pthread_t th;pthread_create(&th,0,spinner,(void*)(long)j);pin(i);
      double w=now(CLOCK_MONOTONIC);while(now(CLOCK_MONOTONIC)-w<2000){} // let the other start
      double v[15];for(int k=0;k<15;k++){double a=now(CLOCK_MONOTONIC);work(n);v[k]=now(CLOCK_MONOTONIC)-a;}
      atomic_store(&stop_flag,1);pthread_join(th,0);printf(" %4.0f",med(v,15));}
      printf("\n");fflush(stdout);}}
  return 0;}
