int harness_placeholder;
