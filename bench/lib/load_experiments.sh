# What the API load benches share (bench/api_load.sh, bench/proxy_load.sh): the experiments the
# list they measure pages through. Sourced, from the repository root.
#
#   store_load_experiments URL N
# stores N experiments "load-1".."load-N" (not activated; a grid of three dropout values each
# over the tiny Multi30k slice in ../shared/data) through POST URL/api/v1/experiments.
store_load_experiments() {
  local url=$1 n=$2 data yaml
  data="$(cd ..; pwd)/shared/data/multi30k-de-en-tiny"
  for i in $(seq 1 "$n"); do
    yaml="name: load-$i
data: {train: {src: $data/train.de, tgt: $data/train.en}}
hyperparameters: {dropout: {type: categorical, vals: [0.0, 0.1, 0.2]}}
searcher: {name: grid, metric: validation_loss, max_length: {batches: 1000000}}"
    /usr/bin/python3 -c 'import json,sys; print(json.dumps({"configYaml": sys.argv[1], "activate": False}))' "$yaml" \
      | curl -sf -o /dev/null -X POST -H 'Content-Type: application/json' --data-binary @- "$url/api/v1/experiments"
  done
}
