#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
int main(int argc,char**argv){ // mode: pause | yield | busy | pause64yield
  const char*m=argv[1]; volatile unsigned long x=0;
  for(;;){
    if(!strcmp(m,"pause")) __builtin_ia32_pause();
    else if(!strcmp(m,"yield")) sched_yield();
    else if(!strcmp(m,"busy")) x++;
    else { for(int i=0;i<64;i++) __builtin_ia32_pause(); sched_yield(); }
  }
}
