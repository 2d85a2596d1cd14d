"""The params file read one way: read with `-S` overrides (`loader`), each dataset's kind and
reader found (`datasets`), its sections built and checked once (`build`), then the checks on
what was built: the search spaces (`search_space`) and the `add` templates (`templates`)."""
