// The tmm CLI's commands; each returns the process exit status.
#pragma once

namespace tmm::cli {

int generate_command(int argc, char** argv);
int info_command(int argc, char** argv);
int bench_decode_command(int argc, char** argv);
int distill_command(int argc, char** argv);

}  // namespace tmm::cli
