/* tests/pipelines/test_pipeline_errors.c: every file in tests/pipelines/bad/ fails to
 * load through the public API with the status, location and message listed here.
 *
 * A message must start with the file name followed by `where` (": <JSON path>: ", or
 * ":<line>:<column>: " for malformed JSON) and contain each fragment. Every file in
 * bad/ must have a row and every row a file, so neither can be forgotten. */
#include <dirent.h>
#include <string.h>

#include "testutil.h"

#define BAD_DIR PF_SOURCE_DIR "/tests/pipelines/bad"

typedef struct bad_case {
    const char *file;
    int status;
    const char *where;
    const char *frag[3];
} bad_case;

static const bad_case cases[] = {
    /* malformed JSON, with line and column */
    {"syntax_missing_comma.json", PF_PARSE, ":4:10: ", {"'}' expected near '\"stages\"'"}},
    {"syntax_trailing_comma.json",
     PF_PARSE,
     ":6:3: ",
     {"unexpected token near ']'", "no comma before it"}},
    {"syntax_duplicate_key.json", PF_PARSE, ":5:36: ", {"duplicate object key", "\"op\""}},
    {"syntax_unterminated.json", PF_PARSE, ":6:0: ", {"expected near end of file"}},
    {"top_level_array.json", PF_PIPELINE, ": ", {"expected an object at the top level"}},
    /* JSON has no comments: said, not left to "string expected near '/'" */
    {"syntax_comment.json", PF_PARSE, ":3:3: ", {"near '/'", "JSON allows no comments"}},
    /* in the file's words, not jansson's (JSON_ALLOW_NUL) */
    {"syntax_nul.json", PF_PARSE, ":4:30: ", {"cannot hold \\u0000", "near '\"a\\u0000b\"'"}},

    /* the document */
    {"missing_version.json", PF_PIPELINE, ": pipefuse: ", {"missing", "\"pipefuse\": 1"}},
    {"wrong_version.json",
     PF_PIPELINE,
     ": pipefuse: ",
     {"format version 2 is not supported", "reads version 1"}},
    {"version_string.json", PF_PIPELINE, ": pipefuse: ", {"got the string \"1\""}},
    /* numbers in messages read back as the value: not "version 1 is not supported" */
    {"version_fraction.json",
     PF_PIPELINE,
     ": pipefuse: ",
     {"format version 1.0000000000000002 is not supported"}},
    {"unknown_top_key.json",
     PF_PIPELINE,
     ": optoins: ",
     {"unknown key 'optoins'", "did you mean 'options'?"}},
    {"misspelt_required_key.json",
     PF_PIPELINE,
     ": ouputs: ",
     {"unknown key 'ouputs'", "did you mean 'outputs'?"}},
    {"plugin_key.json",
     PF_PIPELINE,
     ": plugin: ",
     {"cannot name a library", "configured search path"}},
    {"stage_library_key.json",
     PF_PIPELINE,
     ": stages[0].library: ",
     {"cannot name a library", "configured search path"}},
    {"options_plugin_path.json", PF_PIPELINE, ": options.plugin_path: ", {"cannot name a library"}},

    /* inputs */
    {"inputs_not_list.json",
     PF_PIPELINE,
     ": inputs: ",
     {"expected an array of input names", "got the string \"src\""}},
    {"inputs_empty.json", PF_PIPELINE, ": inputs: ", {"at least one input"}},
    /* reported as itself, not as the stages' references, wherever it stands */
    {"inputs_not_list_last.json",
     PF_PIPELINE,
     ": inputs: ",
     {"expected an array of input names", "got the string \"src\""}},
    {"duplicate_input.json",
     PF_PIPELINE,
     ": inputs[1].name: ",
     {"duplicate input name 'src'", "inputs[0]"}},

    /* stages */
    {"empty_stages.json", PF_PIPELINE, ": stages: ", {"empty", "at least one stage"}},
    {"stages_not_list.json", PF_PIPELINE, ": stages: ", {"expected an array of stages"}},
    {"stage_not_object.json",
     PF_PIPELINE,
     ": stages[0]: ",
     {"expected a stage object", "got the string \"invert\""}},
    {"unknown_stage_key.json",
     PF_PIPELINE,
     ": stages[0].parms: ",
     {"unknown key 'parms'", "did you mean 'params'?"}},
    {"missing_id.json", PF_PIPELINE, ": stages[0].id: ", {"missing"}},
    {"duplicate_id.json", PF_PIPELINE, ": stages[2].id: ", {"duplicate stage id 'a'", "stages[0]"}},
    {"id_is_input.json", PF_PIPELINE, ": stages[0].id: ", {"'src' is also the name of an input"}},
    {"bad_id_chars.json", PF_PIPELINE, ": stages[0].id: ", {"'my-blur' is not an identifier"}},
    {"unknown_op.json",
     PF_PIPELINE,
     ": stages[0].op: ",
     {"unknown op 'gausian'", "did you mean 'gaussian'?"}},
    {"unknown_op_far.json",
     PF_PIPELINE,
     ": stages[0].op: ",
     {"unknown op 'frobnicate'", "pipefuse stages"}},

    /* params */
    {"unknown_param.json",
     PF_PARAM,
     ": stages[0].params.sigam: ",
     {"unknown parameter 'sigam' of gaussian", "did you mean 'sigma'?"}},
    /* a key that is no identifier, in the path as a JSON string */
    {"param_key_quoted.json",
     PF_PARAM,
     ": stages[0].params[\"a\\\"b\\\\c\"]: ",
     {"unknown parameter 'a\"b\\c' of gaussian"}},
    {"unknown_param_none.json",
     PF_PARAM,
     ": stages[0].params.size: ",
     {"median3 takes no parameters"}},
    {"param_not_object.json",
     PF_PIPELINE,
     ": stages[0].params: ",
     {"expected an object of parameters"}},
    {"param_string_for_float.json",
     PF_PARAM,
     ": stages[0].params.sigma: ",
     {"expected a number, got \"2\"", "(gaussian.sigma)"}},
    {"param_real_for_int.json",
     PF_PARAM,
     ": stages[0].params.radius: ",
     {"expected an integer, got 2.5", "(box.radius)"}},
    {"param_number_for_bool.json",
     PF_PARAM,
     ": stages[0].params.alpha: ",
     {"expected true or false, got 1"}},
    {"param_bad_enum.json",
     PF_PARAM,
     ": stages[0].params.mode: ",
     {"unknown value 'nearst'", "'bilinear', 'nearest', 'area'", "did you mean 'nearest'?"}},
    {"param_enum_number.json",
     PF_PARAM,
     ": stages[0].params.angle: ",
     {"'90', '180', '270'", "write \"90\""}},
    {"param_out_of_range.json",
     PF_PARAM,
     ": stages[1].params.sigma: ",
     {"-2 is out of range [0, 64] (gaussian.sigma)"}},
    {"param_int_out_of_range.json",
     PF_PARAM,
     ": stages[0].params.bins: ",
     {"1 is out of range [2, 65536]"}},
    /* the bound as it is (1/1024), not %g's 0.000976562, which is below it */
    {"param_below_bound.json",
     PF_PARAM,
     ": stages[0].params.scale: ",
     {"0.000976562 is out of range [0.0009765625, 64] (resize.scale)"}},
    {"param_int_nearly.json",
     PF_PARAM,
     ": stages[0].params.width: ",
     {"expected an integer, got 5.0000000001"}},
    {"param_int_huge.json",
     PF_PARAM,
     ": stages[0].params.radius: ",
     {"9223372036854775807 is out of range [0, 64]"}},
    {"param_array_length.json",
     PF_PARAM,
     ": stages[0].params.matrix: ",
     {"expected an array of 16 numbers, got 3"}},
    {"param_array_element.json",
     PF_PARAM,
     ": stages[0].params.color: ",
     {"element [2]", "expected a number, got \"red\""}},
    {"levels_check.json",
     PF_PARAM,
     ": stages[0].params: ",
     {"in_low (0.8) must be less than in_high (0.2)", "(levels)"}},
    {"first_error_wins.json", PF_PARAM, ": stages[0].params.gamma: ", {"100 is out of range"}},

    /* the graph */
    {"dangling_input.json",
     PF_PIPELINE,
     ": stages[1].inputs[0]: ",
     {"'wram' names no input or stage", "did you mean 'warm'?"}},
    {"cycle2.json", PF_PIPELINE, ": stages[0]: ", {"cycle: a -> b -> a"}},
    {"cycle3.json", PF_PIPELINE, ": stages[1]: ", {"cycle: a -> b -> c -> a"}},
    /* a long cycle: its ends and its length, the message whole */
    {"cycle_long.json",
     PF_PIPELINE,
     ": stages[0]: ",
     {"cycle: s0 -> s39 -> s38", " -> ... -> ", "s2 -> s1 -> s0 (40 stages)"}},
    {"self_loop.json", PF_PIPELINE, ": stages[0].inputs[0]: ", {"cycle: a -> a"}},
    {"wrong_input_count.json",
     PF_PIPELINE,
     ": stages[0].inputs: ",
     {"blend takes 2 inputs, got 1"}},
    {"chain_needs_inputs.json",
     PF_PIPELINE,
     ": stages[1]: ",
     {"\"inputs\" is missing", "mask takes 3 inputs"}},
    {"both_input_and_inputs.json", PF_PIPELINE, ": stages[0].input: ", {"not both"}},
    {"reduce_as_input.json",
     PF_PIPELINE,
     ": stages[1].inputs[0]: ",
     {"'h' is a reduce stage (histogram)", "not a stage's input"}},
    {"chain_after_reduce.json",
     PF_PIPELINE,
     ": stages[1]: ",
     {"previous stage 'h'", "reduce stage"}},

    /* outputs */
    {"missing_outputs.json", PF_PIPELINE, ": outputs: ", {"missing"}},
    {"no_outputs.json", PF_PIPELINE, ": outputs: ", {"at least one output"}},
    {"output_names_nothing.json",
     PF_PIPELINE,
     ": outputs.out: ",
     {"'mixx' names no input or stage", "did you mean 'mix'?"}},
    {"output_missing_from.json", PF_PIPELINE, ": outputs.out.from: ", {"missing"}},
    {"output_bad_format.json",
     PF_PIPELINE,
     ": outputs.out.format: ",
     {"unknown format 'rgba'", "did you mean 'rgba8'?"}},
    {"table_format_on_image.json",
     PF_PIPELINE,
     ": outputs.out.format: ",
     {"'csv' is a table format", "'blur' makes an image"}},
    {"image_format_on_table.json",
     PF_PIPELINE,
     ": outputs.hist.format: ",
     {"'rgb8' is an image format", "reduce stage (histogram)"}},
    {"output_case_collision.json", PF_PIPELINE, ": outputs.Out: ", {"only in case"}},
    {"output_bad_name.json", PF_PIPELINE, ": outputs[\"my out\"]: ", {"not an identifier"}},

    /* options */
    {"backend_unknown.json",
     PF_PIPELINE,
     ": options.backend: ",
     {"unknown value 'cdua'", "'auto', 'cpu', 'cuda'", "did you mean 'cuda'?"}},
    {"streams_out_of_range.json",
     PF_PIPELINE,
     ": options.streams: ",
     {"65 is out of range [0, 64]"}},
    {"streams_fraction.json",
     PF_PIPELINE,
     ": options.streams: ",
     {"expected an integer, got the number 2.5"}},
    {"threads_wrong_type.json",
     PF_PIPELINE,
     ": options.threads: ",
     {"expected an integer, got \"many\""}},
    {"max_launch_negative.json",
     PF_PIPELINE,
     ": options.max_launch_ms: ",
     {">= 0", "got the number -5"}},
    {"unknown_option.json",
     PF_PIPELINE,
     ": options.fusoin: ",
     {"unknown key 'fusoin'", "did you mean 'fusion'?"}},
};
#define N_CASES ((int)(sizeof cases / sizeof cases[0]))

static void check_case(pf_engine *e, const bad_case *c)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", BAD_DIR, c->file);
    pf_pipeline *p = (pf_pipeline *)1;
    int st = pf_pipeline_load_file(e, path, &p);
    const char *msg = pf_engine_errmsg(e);
    CHECKF(p == NULL, "%s: *out is not NULL after a failure", c->file);
    if (st == PF_OK) {
        CHECKF(0, "%s: loaded, but should fail", c->file);
        pf_pipeline_destroy(p);
        return;
    }
    CHECKF(st == c->status, "%s: status %s, expected %s (%s)", c->file, pf_status_name(st),
           pf_status_name(c->status), msg);
    size_t n = strlen(path);
    CHECKF(strncmp(msg, path, n) == 0, "%s: message does not start with the file: %s", c->file,
           msg);
    CHECKF(strncmp(msg + (strncmp(msg, path, n) == 0 ? n : 0), c->where, strlen(c->where)) == 0,
           "%s: expected '%s' after the file name: %s", c->file, c->where, msg);
    for (int i = 0; i < 3 && c->frag[i]; i++)
        CHECKF(strstr(msg, c->frag[i]) != NULL, "%s: no '%s' in: %s", c->file, c->frag[i], msg);
    if (getenv("PF_TEST_VERBOSE"))
        printf("%s\n", msg);
}

/* Every file in bad/ has a row, every row a file. */
static void check_coverage(void)
{
    DIR *d = opendir(BAD_DIR);
    CHECKF(d != NULL, "cannot open %s", BAD_DIR);
    if (!d)
        return;
    int files = 0;
    struct dirent *ent;
    while ((ent = readdir(d)) != NULL) {
        size_t n = strlen(ent->d_name);
        if (n < 5 || strcmp(ent->d_name + n - 5, ".json") != 0)
            continue;
        files++;
        int found = 0;
        for (int i = 0; i < N_CASES && !found; i++)
            found = strcmp(cases[i].file, ent->d_name) == 0;
        CHECKF(found, "bad/%s has no row in the table", ent->d_name);
    }
    closedir(d);
    CHECKF(files == N_CASES, "%d files in bad/, %d rows in the table", files, N_CASES);
    CHECKF(N_CASES >= 35, "only %d bad pipelines", N_CASES);
}

/* Every truncation and a few thousand random edits of the good files: each loads or
   fails with a message naming the source, and nothing crashes or leaks (run it under
   PIPEFUSE_SANITIZE). */
static void check_mutations(void)
{
    pf_engine_config cfg;
    pf_engine_config_init(&cfg);
    cfg.log = pf_test_quiet_log; /* the unused-stage warnings of the mutants */
    pf_engine *e = pf_test_engine_with(&cfg);
    static const char *const files[] = {"chain.json", "out_of_order.json", "full.json"};
    static const char alphabet[] = "{}[],:\"0123456789.-eE truefalsnl_abcxyz";
    pf_rng rng;
    pf_rng_seed(&rng, 20240611);
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/tests/pipelines/good/%s", PF_SOURCE_DIR, files[f]);
        FILE *fp = fopen(path, "rb");
        CHECKF(fp != NULL, "cannot open %s", path);
        if (!fp)
            continue;
        static char text[16384], edit[16384];
        size_t n = fread(text, 1, sizeof text - 1, fp);
        fclose(fp);
        text[n] = 0;
        int loaded = 0, failed = 0;
        for (int t = 0; t < (int)n + 3000; t++) {
            memcpy(edit, text, n + 1);
            if (t < (int)n) {
                edit[t] = 0; /* truncated */
            } else {
                int edits = pf_rng_range(&rng, 1, 3);
                for (int k = 0; k < edits; k++)
                    edit[pf_rng_range(&rng, 0, (int)n - 2)] =
                        alphabet[pf_rng_range(&rng, 0, (int)sizeof alphabet - 2)];
            }
            pf_pipeline *p = NULL;
            int st = pf_pipeline_load_string(e, edit, "mutant", &p);
            if (st == PF_OK) {
                loaded++;
                CHECK(p != NULL);
                pf_pipeline_destroy(p);
            } else {
                failed++;
                CHECKF(p == NULL && strncmp(pf_engine_errmsg(e), "mutant", 6) == 0,
                       "status %s, message '%s'", pf_status_name(st), pf_engine_errmsg(e));
                CHECKF(st == PF_PARSE || st == PF_PIPELINE || st == PF_PARAM, "status %s: %s",
                       pf_status_name(st), pf_engine_errmsg(e));
            }
        }
        CHECKF(failed > (int)n && loaded > 0, "%s: %d loaded, %d failed", files[f], loaded, failed);
    }
    pf_engine_destroy(e);
}

int main(void)
{
    pf_engine *e = pf_test_engine();
    check_coverage();
    for (int i = 0; i < N_CASES; i++)
        check_case(e, &cases[i]);
    check_mutations();

    /* load_string names the text with the name given */
    pf_pipeline *p = NULL;
    int st = pf_pipeline_load_string(e,
                                     "{\"pipefuse\": 1, \"inputs\": [\"src\"], \"stages\": "
                                     "[{\"id\": \"a\", \"op\": \"invrt\"}], \"outputs\": "
                                     "{\"out\": \"a\"}}",
                                     "inline", &p);
    CHECK(st == PF_PIPELINE && p == NULL);
    CHECKF(strcmp(pf_engine_errmsg(e),
                  "inline: stages[0].op: unknown op 'invrt'; did you mean 'invert'?") == 0,
           "%s", pf_engine_errmsg(e));
    st = pf_pipeline_load_string(e, "{\n  \"pipefuse\": 1,\n  \"inputs\": [\"src\"],,\n}", "s", &p);
    CHECK(st == PF_PARSE);
    CHECKF(strncmp(pf_engine_errmsg(e), "s:3:21: ", 8) == 0, "%s", pf_engine_errmsg(e));

    pf_engine_destroy(e);
    return pf_test_done("test_pipeline_errors");
}
