/* tandem: the command-line tool. Uses only the public API. */
#include "audit.h"
#include "cli.h"
#include "logs.h"

#include <string.h>

void usage_main(FILE *f)
{
    fputs("usage: tandem COMMAND [ARGS]\n"
          "\n"
          "commands:\n"
          "  info      MODEL [--shape N=DxD] [--json]  what a model holds: inputs, outputs, ops, size, FLOPs\n"
          "  run       MODEL [OPTIONS]              run a model and print or save its outputs\n"
          "  bench     MODEL [OPTIONS]              time runs: median, p90, p99, min, throughput, peak RSS\n"
          "  help      [COMMAND]                    this text, or a command's\n"
          "  plan      MODEL [RUN OPTIONS] [--json] where every node runs, why, and what it costs\n"
          "  devices   [--json]                     the devices tandem knows, and why one is unavailable\n"
          "  profile   MODEL [RUN OPTIONS] [--json] where the time goes: per node, per device, per copy\n"
          "  compare   MODEL --devices LIST [--json]  each node's error against the cpu fp32 reference\n"
          "  report    MODEL --devices LIST --html FILE  one HTML page: graph, ledger, timeline, precision\n"
          "  extract   MODEL --node NAME --out DIR  a one-node ONNX reproduction with its real inputs\n"
          "  calibrate  measure per node and device: time, error against cpu fp32, copy cost\n"
          "  audit     MODEL... --devices LIST [--json]  models x devices: fits / falls back by reason / blocked\n"
          "  logs      FILE|DIR... [--json]          fallback logs and ledgers of many runs: when, why, cost, what to fix\n"
          "  diff      A B [--json]                 two ledgers of one model: moved nodes and why, before/after\n"
          "\n"
          "`tandem COMMAND --help` describes a command. `tandem --version` prints the version.\n"
          "\n"
          "exit codes:\n"
          "  0   success\n"
          "  1   usage: unknown command or option, malformed option value\n"
          "  2   invalid or unsupported model or input tensor\n"
          "  3   fallback policy violated\n"
          "  4   device error: a requested device is unavailable or failed\n"
          "  5   I/O error: a file missing, unreadable or unwritable\n"
          "  6   alert: the fallback ratio exceeded --alert-fallback-ratio (profile, run)\n"
          "  70  internal error (a bug in tandem; please report it)\n"
          "Errors are one sentence on stderr, starting with \"tandem: \".\n",
          f);
}

void usage_info(FILE *f)
{
    fputs("usage: tandem info MODEL [--shape NAME=DxD]... [--json]\n"
          "\n"
          "Prints the producer, IR version, opsets, inputs and outputs (element type and\n"
          "shape, dynamic dimensions by name), node count, operator histogram, parameter\n"
          "count and bytes, and FLOPs (Conv, ConvTranspose, Gemm, MatMul; 2 per MAC).\n"
          "\n"
          "  --shape NAME=DxD  describe the model specialised to this input shape, as run\n"
          "                    and plan see it ('?' keeps a dimension; repeatable): the\n"
          "                    outputs' shapes and the FLOPs follow from it\n"
          "  --json            print one JSON document on stdout instead\n",
          f);
}

void usage_run(FILE *f)
{
    fputs("usage: tandem run MODEL [--input NAME=FILE]... [--random] [--shape NAME=DxDx...]...\n"
          "                  [--output-dir DIR] [--output-format npy|pb] [--overwrite] [--threads N]\n"
          "                  [--ledger FILE]\n"
          "                  [RUN OPTIONS]\n"
          "\n"
          "Runs the model once and prints one line per output: name, element type, shape,\n"
          "min, max and mean.\n"
          "\n"
          "  --input NAME=FILE   the value of input NAME, from a .npy file or an ONNX .pb\n"
          "                      (TensorProto, SequenceProto, OptionalProto); split at the last '='\n"
          "  --random            fill inputs not given with fixed-seed random values (floats\n"
          "                      uniform in [-1, 1], integers in [0, 10), random booleans)\n"
          "  --shape NAME=DxD    fix the dynamic dimensions of input NAME ('?' keeps one)\n"
          "  --output-dir DIR    write one .npy per output into DIR (created if missing); names\n"
          "                      keep [A-Za-z0-9._-], others become '_'; collisions get _1, _2...;\n"
          "                      a sequence output is a folder of 0.npy, 1.npy...; a sequence of maps\n"
          "                      (ZipMap's) a folder of 0/keys.npy, 0/values.npy, 1/...; an absent\n"
          "                      optional output writes nothing\n"
          "  --output-format pb  write NAME.pb per output instead, as the ONNX node tests store values:\n"
          "                      a TensorProto, a SequenceProto, an OptionalProto (also when absent)\n"
          "                      for an output declared optional; a sequence of maps is refused\n"
          "  --overwrite         replace existing files in DIR (never done otherwise)\n"
          "  --threads N         CPU worker threads (0: the default)\n"
          "  --ledger FILE       write the ledger (the plan, and the run's copies and bytes) as JSON\n"
          "  --repeat N          run N times in one session (the breaker and re-planning act across\n"
          "                      runs); every run's outputs are compared with the first's, a summary\n"
          "                      goes to stderr, and a failed run or a difference exits 2\n"
          DIAG_FLAGS_USAGE
          "The shapes of the given inputs fix the dynamic dimensions the plan sees, unless\n"
          "--shape sets them.\n"
          "\n",
          f);
    usage_runopts(f);
    usage_adaptopts(f);
}

static const char *const later[] = {"calibrate"};

static int is_help(const char *s) { return strcmp(s, "--help") == 0 || strcmp(s, "-h") == 0; }

int main(int argc, char **argv)
{
    if (argc < 2) {
        cli_error("no command given");
        usage_main(stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (is_help(cmd)) {
        usage_main(stdout);
        return EXIT_OK;
    }
    if (strcmp(cmd, "--version") == 0) {
        printf("tandem %s\n", TDM_VERSION_STRING);
        return EXIT_OK;
    }
    if (strcmp(cmd, "help") == 0) {
        /* `tandem help`, `tandem help --help` and `tandem help -h` alike */
        if (argc < 3 || strcmp(argv[2], "--help") == 0 || strcmp(argv[2], "-h") == 0) {
            usage_main(stdout);
            return EXIT_OK;
        }
        if (strcmp(argv[2], "info") == 0)
            usage_info(stdout);
        else if (strcmp(argv[2], "run") == 0)
            usage_run(stdout);
        else if (strcmp(argv[2], "bench") == 0)
            usage_bench(stdout);
        else if (strcmp(argv[2], "plan") == 0)
            usage_plan(stdout);
        else if (strcmp(argv[2], "devices") == 0)
            usage_devices(stdout);
        else if (strcmp(argv[2], "profile") == 0)
            usage_profile(stdout);
        else if (strcmp(argv[2], "compare") == 0)
            usage_compare(stdout);
        else if (strcmp(argv[2], "report") == 0)
            usage_report(stdout);
        else if (strcmp(argv[2], "extract") == 0)
            usage_extract(stdout);
        else if (strcmp(argv[2], "calibrate") == 0)
            usage_calibrate(stdout);
        else if (strcmp(argv[2], "audit") == 0)
            usage_audit(stdout);
        else if (strcmp(argv[2], "logs") == 0)
            usage_logs(stdout);
        else if (strcmp(argv[2], "diff") == 0)
            usage_diff(stdout);
        else {
            for (size_t i = 0; i < sizeof later / sizeof later[0]; i++)
                if (strcmp(argv[2], later[i]) == 0) {
                    cli_error("'%s' is not implemented yet", argv[2]);
                    return EXIT_USAGE;
                }
            cli_error("unknown command '%s'; `tandem --help` lists the commands", argv[2]);
            return EXIT_USAGE;
        }
        return EXIT_OK;
    }
    if (strcmp(cmd, "info") == 0)
        return cmd_info(argc - 1, argv + 1);
    if (strcmp(cmd, "run") == 0)
        return cmd_run(argc - 1, argv + 1);
    if (strcmp(cmd, "bench") == 0)
        return cmd_bench(argc - 1, argv + 1);
    if (strcmp(cmd, "plan") == 0)
        return cmd_plan(argc - 1, argv + 1);
    if (strcmp(cmd, "devices") == 0)
        return cmd_devices(argc - 1, argv + 1);
    if (strcmp(cmd, "profile") == 0)
        return cmd_profile(argc - 1, argv + 1);
    if (strcmp(cmd, "compare") == 0)
        return cmd_compare(argc - 1, argv + 1);
    if (strcmp(cmd, "report") == 0)
        return cmd_report(argc - 1, argv + 1);
    if (strcmp(cmd, "extract") == 0)
        return cmd_extract(argc - 1, argv + 1);
    if (strcmp(cmd, "calibrate") == 0)
        return cmd_calibrate(argc - 1, argv + 1);
    if (strcmp(cmd, "audit") == 0)
        return cmd_audit(argc - 1, argv + 1);
    if (strcmp(cmd, "logs") == 0)
        return cmd_logs(argc - 1, argv + 1);
    if (strcmp(cmd, "diff") == 0)
        return cmd_diff(argc - 1, argv + 1);
    for (size_t i = 0; i < sizeof later / sizeof later[0]; i++)
        if (strcmp(cmd, later[i]) == 0) {
            cli_error("'%s' is not implemented yet", cmd);
            return EXIT_USAGE;
        }
    if (cmd[0] == '-')
        cli_error("unknown option '%s'; `tandem --help` lists the commands", cmd);
    else
        cli_error("unknown command '%s'; `tandem --help` lists the commands", cmd);
    return EXIT_USAGE;
}
