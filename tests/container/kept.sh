# Sourced by standins.sh and py312-standin.sh. An engine that keeps its images from one session
# to the next (tests/runner/images.py) holds what a recipe made under the tag pipeline-kept/NAME:RECIPE
# as well: a later session with the same recipe finds it there, and neither loads nor builds it.

kept_has() {  # NAME RECIPE IMAGE...: the engine holds these images, and that recipe's mark
    docker image inspect "pipeline-kept/$1:$2" "${@:3}" >/dev/null 2>&1
}

kept_mark() {  # NAME RECIPE IMAGE: IMAGE is what that recipe made (the marks of others go)
    docker images --format '{{.Repository}}:{{.Tag}}' "pipeline-kept/$1" | { grep -vx "pipeline-kept/$1:$2" || true; } \
        | xargs -r docker rmi >/dev/null
    docker tag "$3" "pipeline-kept/$1:$2"
}
