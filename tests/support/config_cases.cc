#include "tests/support/config_cases.h"

namespace sf::testing {
namespace {

using Sections = ConfigSections;

Sections BaseSections() {
  return {
      {"name", "name: test-exp"},
      {"data", "data:\n"
               "  train: {src: train.de, tgt: train.en}\n"
               "  valid: {src: valid.de, tgt: valid.en}\n"
               "  tokenizer: {type: sentencepiece, vocab_size: 8000, model_type: bpe, shared: true}"},
      {"hyperparameters", "hyperparameters:\n"
                          "  arch: transformer\n"
                          "  d_model: 256\n"
                          "  heads: 4\n"
                          "  dropout: 0.1\n"
                          "  lr: 0.001\n"
                          "  optimizer: {type: radam, betas: [0.9, 0.98], eps: 1.0e-8}"},
      {"precision", "precision: bf16"},
      {"searcher", "searcher:\n"
                   "  name: single\n"
                   "  metric: bleu\n"
                   "  max_length: {batches: 1000}"},
  };
}

}  // namespace

std::string WithSections(ConfigSections base, const ConfigSections& changes) {
  for (const auto& [key, text] : changes) {
    bool found = false;
    for (auto& [k, v] : base) {
      if (k == key) {
        v = text;
        found = true;
      }
    }
    if (!found) base.emplace_back(key, text);
  }
  std::string out;
  for (const auto& [k, v] : base) {
    if (!v.empty()) out += v + "\n";
  }
  return out;
}

// The base document with some sections replaced ("" drops one) or added.
std::string With(std::vector<std::pair<std::string, std::string>> changes) {
  return WithSections(BaseSections(), changes);
}

std::vector<ConfigCase> ConfigCases() {
  std::vector<ConfigCase> c;
  // ---- good documents
  c.push_back({"base", With({}), {}});
  c.push_back({"minimal_defaults",
               "name: x\ndata: {train: {src: a, tgt: b}}\n"
               "searcher: {name: single, metric: validation_loss, max_length: {epochs: 1}}\n",
               {}});
  c.push_back({"grid_with_counts",
               With({{"searcher", "searcher: {name: grid, metric: bleu, max_length: {batches: 10}}"},
                     {"hyperparameters",
                      "hyperparameters:\n  dropout: {type: double, minval: 0.0, maxval: 0.3, count: 3}\n"
                      "  lr: {type: log, minval: -4, maxval: -3, base: 10, count: 2}\n"
                      "  encoder_layers: {type: int, minval: 2, maxval: 4}\n"
                      "  activation: {type: categorical, vals: [relu, gelu]}"}}),
               {}});
  c.push_back({"random_spaces",
               With({{"searcher", "searcher: {name: random, metric: bleu, max_trials: 8, seed: 3, "
                                  "max_length: {batches: 10}}"},
                     {"hyperparameters", "hyperparameters:\n  dropout: {type: double, minval: 0.0, maxval: 0.3}"}}),
               {}});
  c.push_back({"asha_full",
               With({{"searcher", "searcher: {name: adaptive_asha, metric: bleu, smaller_is_better: false, "
                                  "max_trials: 16, max_length: {batches: 20000}, max_concurrent_trials: 4, "
                                  "mode: aggressive, divisor: 3, max_rungs: 4, bracket_rungs: [2, 3]}"},
                     {"hyperparameters", "hyperparameters:\n  lr: {type: log, minval: -4, maxval: -2.5, base: 10}"}}),
               {}});
  c.push_back({"fp16_static_scaling",
               With({{"precision", "precision: fp16"},
                     {"loss_scaling", "loss_scaling: {type: static, scale: 1024}"}}),
               {}});
  c.push_back({"nested_space_in_group",
               With({{"searcher", "searcher: {name: random, metric: bleu, max_trials: 2, max_length: {batches: 5}}"},
                     {"hyperparameters", "hyperparameters:\n  lr_schedule: {type: inverse_sqrt, "
                                         "warmup: {type: int, minval: 100, maxval: 4000}}"}}),
               {}});
  c.push_back({"all_sections",
               With({{"description", "description: everything set"},
                     {"optimizations", "optimizations: {aggregation_frequency: 4, allreduce_dtype: bf16}"},
                     {"resources", "resources: {slots_per_trial: 2, resource_pool: gpu, priority: 10}"},
                     {"min_validation_period", "min_validation_period: {batches: 500}"},
                     {"min_checkpoint_period", "min_checkpoint_period: {epochs: 1}"},
                     {"checkpoint_storage", "checkpoint_storage: {type: shared_fs, host_path: /tmp/ck, "
                                            "save_experiment_best: 2, save_trial_best: 1, save_trial_latest: 1}"},
                     {"max_restarts", "max_restarts: 3"},
                     {"scheduling_unit", "scheduling_unit: 50"}}),
               {}});
  c.push_back({"checkpoint_storage_s3",
               With({{"checkpoint_storage", "checkpoint_storage: {type: s3, bucket: ckpts, prefix: team/a/, "
                                            "endpoint_url: 'http://127.0.0.1:7480', region: eu-west-1}"}}),
               {}});
  c.push_back({"checkpoint_storage_s3_without_bucket",
               With({{"checkpoint_storage", "checkpoint_storage: {type: s3, endpoint_url: 'http://h:1'}"}}),
               {"checkpoint_storage.bucket"}, "checkpoint_storage.bucket: required field is missing"});
  c.push_back({"checkpoint_storage_s3_key_without_secret",
               With({{"checkpoint_storage", "checkpoint_storage: {type: s3, bucket: b12, access_key: AK}"}}),
               {"checkpoint_storage.secret_key"},
               "checkpoint_storage.secret_key: give access_key and secret_key together, or neither (then "
               "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY come from the environment)"});
  c.push_back({"checkpoint_storage_s3_with_host_path",
               With({{"checkpoint_storage", "checkpoint_storage: {type: s3, bucket: b12, host_path: /x}"}}),
               {"checkpoint_storage.host_path"}, "checkpoint_storage.host_path: is not used by type s3 storage"});
  c.push_back({"checkpoint_storage_s3_endpoint_scheme",
               With({{"checkpoint_storage", "checkpoint_storage: {type: s3, bucket: b12, endpoint_url: 'h:1'}"}}),
               {"checkpoint_storage.endpoint_url"},
               "checkpoint_storage.endpoint_url: must start with http:// or https:// (got \"h:1\")"});
  c.push_back({"anchors_and_aliases",
               With({{"data", "data:\n  train: &files {src: a, tgt: b}\n  valid: *files"}}), {}});
  c.push_back({"const_space",
               With({{"hyperparameters", "hyperparameters:\n  dropout: {type: const, val: 0.2}"}}), {}});

  // ---- typos and unknown keys
  c.push_back({"typo_top_level", With({{"seracher", "seracher: {}"}}), {"seracher"},
               "seracher: unknown field (did you mean \"searcher\"?)"});
  c.push_back({"typo_searcher_key",
               With({{"searcher", "searcher: {name: random, metric: bleu, max_trails: 4, max_trials: 4, "
                                  "max_length: {batches: 5}}"}}),
               {"searcher.max_trails"},
               "searcher.max_trails: unknown field (did you mean \"max_trials\"?)"});
  c.push_back({"typo_hyperparameter",
               With({{"hyperparameters", "hyperparameters:\n  drpout: 0.1"}}),
               {"hyperparameters.drpout"},
               "hyperparameters.drpout: unknown field (did you mean \"dropout\"?)"});
  c.push_back({"typo_data_key",
               With({{"data", "data: {train: {src: a, tgt: b}, vaild: {src: a, tgt: b}}"}}),
               {"data.vaild"}, "data.vaild: unknown field (did you mean \"valid\"?)"});
  c.push_back({"typo_enum_value", With({{"precision", "precision: bf61"}}), {"precision"},
               "precision: \"bf61\" must be one of fp32, bf16, fp16 (did you mean \"bf16\"?)"});
  c.push_back({"unknown_searcher", With({{"searcher", "searcher: {name: bayes, metric: bleu, max_length: {batches: 5}}"}}),
               {"searcher.name"}});
  c.push_back({"unknown_optimizer_member",
               With({{"hyperparameters", "hyperparameters:\n  optimizer: {type: adamw, beta: [0.9, 0.98]}"}}),
               {"hyperparameters.optimizer.beta"},
               "hyperparameters.optimizer.beta: unknown field (did you mean \"betas\"?)"});
  c.push_back({"member_not_for_type",
               With({{"hyperparameters", "hyperparameters:\n  optimizer: {type: sgd, betas: [0.9, 0.98]}"}}),
               {"hyperparameters.optimizer.betas"}});
  c.push_back({"searcher_field_not_used",
               With({{"searcher", "searcher: {name: grid, metric: bleu, max_trials: 5, max_length: {batches: 5}}"}}),
               {"searcher.max_trials"},
               "searcher.max_trials: is not used by the grid searcher"});

  // ---- wrong types
  c.push_back({"string_for_int", With({{"resources", "resources: {slots_per_trial: two}"}}),
               {"resources.slots_per_trial"},
               "resources.slots_per_trial: \"two\" is not an integer"});
  c.push_back({"quoted_int", With({{"max_restarts", "max_restarts: \"3\""}}), {"max_restarts"},
               "max_restarts: \"3\" is not an integer"});
  c.push_back({"float_for_int", With({{"max_restarts", "max_restarts: 2.5"}}), {"max_restarts"}});
  c.push_back({"list_for_map", With({{"data", "data: [a, b]"}}), {"data"},
               "data: expected a mapping, got a list"});
  c.push_back({"map_for_scalar", With({{"name", "name: {first: a}"}}), {"name"}});
  c.push_back({"nul_in_string", With({{"name", "name: \"a\\0b\""}}), {"name"},
               "name: must not contain a NUL character (\\0)"});
  c.push_back({"bool_as_string", With({{"hyperparameters", "hyperparameters:\n  normalize_before: yes"}}),
               {"hyperparameters.normalize_before"}});
  c.push_back({"betas_wrong_length",
               With({{"hyperparameters", "hyperparameters:\n  optimizer: {type: adamw, betas: [0.9]}"}}),
               {"hyperparameters.optimizer.betas"}});

  // ---- out of range
  c.push_back({"max_trials_negative",
               With({{"searcher", "searcher: {name: random, metric: bleu, max_trials: -3, max_length: {batches: 5}}"}}),
               {"searcher.max_trials"}, "searcher.max_trials: -3 must be >= 1"});
  c.push_back({"aggregation_zero", With({{"optimizations", "optimizations: {aggregation_frequency: 0}"}}),
               {"optimizations.aggregation_frequency"},
               "optimizations.aggregation_frequency: 0 must be >= 1"});
  c.push_back({"dropout_one", With({{"hyperparameters", "hyperparameters:\n  dropout: 1.0"}}),
               {"hyperparameters.dropout"}, "hyperparameters.dropout: 1.0 must be < 1"});
  c.push_back({"priority_too_high", With({{"resources", "resources: {priority: 150}"}}),
               {"resources.priority"}, "resources.priority: 150 must be <= 99"});
  c.push_back({"weight_zero", With({{"resources", "resources: {weight: 0}"}}),
               {"resources.weight"}, "resources.weight: 0 must be > 0"});
  c.push_back({"slurm_requests",
               With({{"resources", "resources: {resource_pool: hpc}\nslurm: {time: \"1:30:00\", account: ml, qos: high, "
                                   "sbatch_args: [--exclusive, \"--constraint=a100\"]}"}}),
               {}});
  c.push_back({"slurm_bad_time", With({{"resources", "slurm: {time: soon}"}}), {"slurm.time"},
               "slurm.time: \"soon\" is not a Slurm time limit (minutes, HH:MM:SS or D-HH:MM:SS)"});
  c.push_back({"slurm_reserved_option", With({{"resources", "slurm: {sbatch_args: [\"--output=/etc/passwd\"]}"}}),
               {"slurm.sbatch_args[0]"},
               "slurm.sbatch_args[0]: --output is set by Steadfast (or the pool's administrator) and cannot be given here"});
  c.push_back({"slurm_not_an_option", With({{"resources", "slurm: {sbatch_args: [exclusive], partition: x}"}}),
               {"slurm.sbatch_args[0]", "slurm.partition"}});
  c.push_back({"length_zero",
               With({{"searcher", "searcher: {name: single, metric: bleu, max_length: {batches: 0}}"}}),
               {"searcher.max_length.batches"}});
  c.push_back({"length_both_units",
               With({{"min_validation_period", "min_validation_period: {batches: 5, epochs: 1}"}}),
               {"min_validation_period"}});
  c.push_back({"space_min_above_max",
               With({{"searcher", "searcher: {name: random, metric: bleu, max_trials: 2, max_length: {batches: 5}}"},
                     {"hyperparameters", "hyperparameters:\n  dropout: {type: double, minval: 0.3, maxval: 0.1}"}}),
               {"hyperparameters.dropout.maxval"}});
  c.push_back({"space_out_of_bounds",
               With({{"searcher", "searcher: {name: random, metric: bleu, max_trials: 2, max_length: {batches: 5}}"},
                     {"hyperparameters", "hyperparameters:\n  dropout: {type: double, minval: 0.0, maxval: 1.5}"}}),
               {"hyperparameters.dropout.maxval"}});
  c.push_back({"heads_do_not_divide",
               With({{"hyperparameters", "hyperparameters:\n  d_model: 256\n  heads: 5"}}),
               {"hyperparameters.heads"}, "hyperparameters.heads: 5 heads do not divide d_model 256"});
  c.push_back({"static_scale_negative",
               With({{"loss_scaling", "loss_scaling: {type: static, scale: -1}"}}),
               {"loss_scaling.scale"}});

  // ---- missing and conflicting fields
  c.push_back({"missing_name", With({{"name", ""}}), {"name"}, "name: required field is missing"});
  c.push_back({"missing_metric_and_length",
               With({{"searcher", "searcher: {name: single}"}}),
               {"searcher.metric", "searcher.max_length"}});
  c.push_back({"missing_train_tgt", With({{"data", "data: {train: {src: a}}"}}), {"data.train.tgt"}});
  c.push_back({"grid_double_without_count",
               With({{"searcher", "searcher: {name: grid, metric: bleu, max_length: {batches: 5}}"},
                     {"hyperparameters", "hyperparameters:\n  dropout: {type: double, minval: 0.0, maxval: 0.3}"}}),
               {"hyperparameters.dropout"},
               "hyperparameters.dropout: grid search over a double space needs count (how many grid points)"});
  c.push_back({"single_with_space",
               With({{"hyperparameters", "hyperparameters:\n  lr: {type: log, minval: -4, maxval: -3}"}}),
               {"hyperparameters.lr"}});
  c.push_back({"metric_direction_contradiction",
               With({{"searcher", "searcher: {name: single, metric: bleu, smaller_is_better: true, "
                                  "max_length: {batches: 5}}"}}),
               {"searcher.smaller_is_better"}});
  c.push_back({"unknown_metric",
               With({{"searcher", "searcher: {name: single, metric: blue, max_length: {batches: 5}}"}}),
               {"searcher.metric"}});
  c.push_back({"share_embeddings_without_shared_vocab",
               With({{"data", "data: {train: {src: a, tgt: b}, tokenizer: {shared: false}}"},
                     {"hyperparameters", "hyperparameters:\n  share_embeddings: true"}}),
               {"hyperparameters.share_embeddings"}});
  c.push_back({"untied_output_with_shared_embeddings",
               With({{"hyperparameters", "hyperparameters:\n  share_embeddings: true\n"
                                         "  share_decoder_input_output_embed: false"}}),
               {"hyperparameters.share_decoder_input_output_embed"}});
  c.push_back({"duplicate_key", With({{"name2", "name: again"}}), {"name"}});
  c.push_back({"several_errors_together",
               With({{"precision", "precision: fp8"},
                     {"max_restarts", "max_restarts: -1"},
                     {"resources", "resources: {slots_per_trial: 0}"}}),
               {"precision", "max_restarts", "resources.slots_per_trial"}});

  // ---- documents that are not documents
  c.push_back({"empty_file", "", {"<document>"}, "<document>: the document is empty"});
  c.push_back({"only_comments", "# nothing here\n", {"<document>"}});
  c.push_back({"scalar_root", "just a string\n", {"<document>"}});
  c.push_back({"list_root", "- a\n- b\n", {"<document>"}});
  c.push_back({"syntax_error_unclosed", "name: x\ndata: {train: [a, b\n", {"<document>"}});
  c.push_back({"syntax_error_bad_indent", "name: x\n  data: 1\n bad: 2\n", {"<document>"}});
  c.push_back({"binary_garbage", std::string("\x7f\x45\x4c\x46\x02\x01\x01\x00\xff\xfe", 10),
               {"<document>"}});
  c.push_back({"two_documents", With({}) + "---\nname: other\n", {"<document>"}});
  return c;
}


}  // namespace sf::testing
