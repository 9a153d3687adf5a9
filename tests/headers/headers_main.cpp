// The other translation units of this target each include one public header alone;
// reaching here means every one of them compiled.
#include <cstdio>

int main() {
  std::printf("compiled %d public headers, each on its own\n", SHARDCAST_HEADER_COUNT);
  return SHARDCAST_HEADER_COUNT > 0 ? 0 : 1;
}
