# `sam build` runs this target for the ModelsLayer (BuildMethod: makefile); the functions
# are built by cargo lambda.
build-ModelsLayer:
	bash scripts/ci/models_layer.sh "$(ARTIFACTS_DIR)"
