"""BFCL's AST checker for Python function calls, as the `bfcl-eval` wheel's
`bfcl_eval/eval_checker/ast_eval/ast_checker.py` (v4) decides them, for a model that calls functions through an
OpenAI-style API (dots in function names written as underscores, as BFCL's OpenAI handler names the tools).

The wheel's own module cannot be imported cheaply (it imports every model handler of the leaderboard, and with them
the SDKs of a dozen vendors), so this is its Python path line by line: tests/eval/test_bfcl.py loads the wheel's
checker beside it and requires the same verdict on every possible answer and on wrong calls made from them.

A model's output is a list of calls, each `{function name: {argument: value}}`; a possible answer lists, per
function, each parameter's acceptable values ("" among them: the parameter may be left out).
"""

from __future__ import annotations

import re
from typing import Any

PYTHON_TYPE_MAPPING: dict[str, type] = {"string": str, "integer": int, "float": float, "boolean": bool,
                                        "array": list, "tuple": list, "dict": dict, "any": str}
PYTHON_NESTED_TYPE_CHECK_LIST = ("array", "tuple")

Result = dict[str, Any]


def _fail(error: str, error_type: str) -> Result:
    return {"valid": False, "error": [error], "error_type": error_type}


def ast_check(func_description: list[dict[str, Any]], model_output: list[dict[str, Any]],
              possible_answer: list[dict[str, Any]], test_category: str) -> Result:
    """BFCL's `ast_checker` for language Python: parallel categories order-free, multiple ones one call of the
    expected function, the rest exactly one call."""
    if "parallel" in test_category:
        return parallel_function_checker_no_order(func_description, model_output, possible_answer)
    if "multiple" in test_category:
        return multiple_function_checker(func_description, model_output, possible_answer)
    if len(model_output) != 1:
        return _fail("Wrong number of functions.", "simple_function_checker:wrong_count")
    return simple_function_checker(func_description[0], model_output[0], possible_answer[0])


def find_description(func_descriptions: Any, name: str) -> Any:
    if isinstance(func_descriptions, list):
        return next((f for f in func_descriptions if f["name"] == name), None)
    return func_descriptions


def get_possible_answer_type(possible_answer: list[Any]) -> type | None:
    for answer in possible_answer:
        if answer != "":
            return type(answer)
    return None


def convert_func_name(function_name: str) -> str:
    """The name an OpenAI-style API gives the function: dots as underscores."""
    return re.sub(r"\.", "_", function_name) if "." in function_name else function_name


def type_checker(param: str, value: Any, possible_answer: list[Any], expected_type_description: str,
                 expected_type_converted: type, nested_type_converted: type | None) -> Result:
    result: Result = {"valid": True, "error": [], "is_variable": False, "error_type": "type_error:simple"}
    is_variable = False
    possible_answer_type = get_possible_answer_type(possible_answer)
    if possible_answer_type is not None and possible_answer_type != expected_type_converted:
        is_variable = True
    if type(value) is expected_type_converted:
        if nested_type_converted is None:
            result["is_variable"] = is_variable
            return result
        for possible_answer_item in possible_answer:
            flag = True
            if type(possible_answer_item) is list:
                for value_item in value:
                    checker_result = type_checker(param, value_item, possible_answer_item, str(nested_type_converted),
                                                  nested_type_converted, None)
                    if not checker_result["valid"]:
                        flag = False
                        break
            if flag:
                return {"valid": True, "error": [], "is_variable": is_variable}
        result["valid"] = False
        result["error"] = [f"Nested type checking failed for parameter {param!r}. Expected outer type "
                           f"{expected_type_description} with inner type {nested_type_converted}. Parameter value: "
                           f"{value!r}."]
        result["error_type"] = "type_error:nested"
    possible_answer_type = get_possible_answer_type(possible_answer)
    if possible_answer_type is not None and type(value) is possible_answer_type:
        result["is_variable"] = True
        return result
    result["valid"] = False
    result["error"].append(f"Incorrect type for parameter {param!r}. Expected type {expected_type_description}, got "
                           f"{type(value).__name__}. Parameter value: {value!r}.")
    result["error_type"] = "type_error:simple"
    return result


def standardize_string(input_string: str) -> str:
    """Spaces and `,./-_*^` removed, lower case, single quotes as double (BFCL's own normalisation)."""
    return re.sub(r"[ \,\.\/\-\_\*\^]", "", input_string).lower().replace("'", '"')


def string_checker(param: str, model_output: str, possible_answer: list[Any]) -> Result:
    standardized = [standardize_string(a) for a in possible_answer if type(a) is str]
    if standardize_string(model_output) not in standardized:
        return _fail(f"Invalid value for parameter {param!r}: {model_output!r}. Expected one of {possible_answer}. "
                     "Case insensitive.", "value_error:string")
    return {"valid": True, "error": []}


def list_checker(param: str, model_output: list[Any], possible_answer: list[Any]) -> Result:
    standardized_output = [standardize_string(v) if type(v) is str else v for v in model_output]
    standardized_answers = [[standardize_string(v) if type(v) is str else v for v in answer]
                            for answer in possible_answer]
    if standardized_output not in standardized_answers:
        return _fail(f"Invalid value for parameter {param!r}: {model_output!r}. Expected one of {possible_answer}.",
                     "value_error:list/tuple")
    return {"valid": True, "error": []}


def dict_checker(param: str, model_output: dict[str, Any], possible_answers: list[Any]) -> Result:
    result: Result = {"valid": False, "error": [], "error_type": "dict_checker:unclear"}
    for possible_answer in possible_answers:
        if possible_answer == "":
            continue
        result = {"valid": False, "error": [], "error_type": "dict_checker:unclear"}
        flag = True
        for key, value in model_output.items():
            if key not in possible_answer:
                result["error"].append(f"Unexpected dict key parameter: '{key}'.")
                result["error_type"] = "value_error:dict_key"
                flag = False
                break
            standardized_value = standardize_string(value) if type(value) is str else value
            standardized_answer = [standardize_string(v) if type(v) is str else v for v in possible_answer[key]]
            if standardized_value not in standardized_answer:
                result["error"].append(f"Invalid value for parameter {key!r}: {value!r}. Expected one of "
                                       f"{standardized_answer}.")
                result["error_type"] = "value_error:dict_value"
                flag = False
                break
        for key, value in possible_answer.items():
            if key not in model_output and "" not in value:
                result["error"].append(f"Missing dict key parameter: '{key}'.")
                result["error_type"] = "value_error:dict_key"
                flag = False
                break
        if flag:
            return {"valid": True, "error": []}
    return result


def list_dict_checker(param: str, model_output: list[Any], possible_answers: list[Any]) -> Result:
    result: Result = {"valid": False, "error": [], "error_type": "list_dict_checker:unclear"}
    for answer in possible_answers:
        flag = True
        if len(model_output) != len(answer):
            result = {"valid": False, "error": ["Wrong number of dictionaries in the list."],
                      "error_type": "value_error:list_dict_count"}
            continue
        for index, item in enumerate(model_output):
            result = dict_checker(param, item, [answer[index]])
            if not result["valid"]:
                flag = False
                break
        if flag:
            return {"valid": True, "error": []}
    return result


def simple_function_checker(func_description: dict[str, Any], model_output: dict[str, Any],
                            possible_answer: dict[str, Any]) -> Result:
    possible = next(iter(possible_answer.values()))
    param_details = func_description["parameters"]["properties"]
    required_params = func_description["parameters"]["required"]
    result: Result = {"valid": True, "error": [], "error_type": "simple_function_checker:unclear"}
    func_name = convert_func_name(func_description["name"])
    if func_name not in model_output:
        return _fail(f"Function name {func_name!r} not found in model output.",
                     "simple_function_checker:wrong_func_name")
    model_params = model_output[func_name]
    for param in required_params:
        if param not in model_params:
            return _fail(f"Missing required parameter: {param!r}.", "simple_function_checker:missing_required")
    for param, given in model_params.items():
        value = given
        if param not in param_details or param not in possible:
            return _fail(f"Unexpected parameter: {param!r}.", "simple_function_checker:unexpected_param")
        expected_type_description = param_details[param]["type"]
        expected_type_converted = PYTHON_TYPE_MAPPING[expected_type_description]
        nested_type_converted = None
        if expected_type_description in PYTHON_NESTED_TYPE_CHECK_LIST:
            nested_type_converted = PYTHON_TYPE_MAPPING[param_details[param]["items"]["type"]]
        if expected_type_description == "tuple" and type(value) is tuple:
            value = list(value)
        if expected_type_description == "float" and type(value) is int:
            value = float(value)
        type_check = type_checker(param, value, possible[param], expected_type_description,
                                  expected_type_converted, nested_type_converted)
        if not type_check["valid"]:
            return type_check
        if not type_check["is_variable"]:
            if expected_type_converted is dict:
                result = dict_checker(param, value, possible[param])
                if not result["valid"]:
                    return result
                continue
            if expected_type_converted is list and nested_type_converted is dict:
                result = list_dict_checker(param, value, possible[param])
                if not result["valid"]:
                    return result
                continue
            if expected_type_converted is str:
                result = string_checker(param, value, possible[param])
                if not result["valid"]:
                    return result
                continue
            if expected_type_converted is list:
                result = list_checker(param, value, possible[param])
                if not result["valid"]:
                    return result
                continue
        if value not in possible[param]:
            return _fail(f"Invalid value for parameter {param!r}: {value!r}. Expected one of {possible[param]}.",
                         "value_error:others")
    for param in possible:
        if param not in model_params and "" not in possible[param]:
            return _fail(f"Optional parameter {param!r} not provided and not marked as optional.",
                         "simple_function_checker:missing_optional")
    return result


def parallel_function_checker_no_order(func_descriptions: list[dict[str, Any]], model_output: list[dict[str, Any]],
                                       possible_answers: list[dict[str, Any]]) -> Result:
    if len(model_output) != len(possible_answers):
        return _fail("Wrong number of functions.", "parallel_function_checker_no_order:wrong_count")
    matched: list[int] = []
    for i, answer in enumerate(possible_answers):
        description = find_description(func_descriptions, next(iter(answer.keys())))
        result: Result = {"valid": False}
        for index, output in enumerate(model_output):
            if index in matched:
                continue
            result = simple_function_checker(description, output, answer)
            if result["valid"]:
                matched.append(index)
                break
        if not result["valid"]:
            considered = [k for k in range(len(model_output)) if k not in matched]
            return _fail(f"Could not find a matching function among index {considered} of model output for index {i} "
                         "of possible answers.", "parallel_function_checker_no_order:cannot_find_match")
    return {"valid": True, "error": []}


def multiple_function_checker(func_descriptions: list[dict[str, Any]], model_output: list[dict[str, Any]],
                              possible_answers: list[dict[str, Any]]) -> Result:
    if len(model_output) != len(possible_answers):
        return _fail("Wrong number of functions.", "multiple_function_checker:wrong_count")
    description = find_description(func_descriptions, next(iter(possible_answers[0].keys())))
    return simple_function_checker(description, model_output[0], possible_answers[0])
