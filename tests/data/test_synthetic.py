"""The synthetic French->English grammar: determinism, lengths, and each phenomenon rendered right."""
from __future__ import annotations

import pytest

from data import synthetic as syn
from utils.errors import DataError


def noun(fr: str) -> syn.Noun:
    return next(n for n in syn.PEOPLE + syn.ANIMALS + syn.THINGS + syn.PLACES if n.fr == fr)


def adj(fr: str) -> syn.Adjective:
    return next(a for a in syn.PRE_ADJECTIVES + syn.POST_ADJECTIVES if a.forms[0] == fr)


def verb(fr: str) -> syn.Verb:
    return next(v for v in syn.TRANSITIVE + syn.INTRANSITIVE if v.fr == fr)


def render(fr, en):
    return syn.sentence(fr, en)


def test_deterministic_by_seed():
    assert syn.generate_pairs(50, 3, 12, 7) == syn.generate_pairs(50, 3, 12, 7)
    assert syn.generate_pairs(50, 3, 12, 7) != syn.generate_pairs(50, 3, 12, 8)


@pytest.mark.parametrize("lo, hi", [(2, 4), (3, 12), (10, 10), (30, 50), (55, 60)])
def test_lengths_stay_in_range(lo, hi):
    src, tgt = syn.generate_pairs(300, lo, hi, 1)
    assert len(src) == len(tgt) == 300
    assert all(lo <= len(s.split()) <= hi for s in src)
    assert all(s[0].isupper() and s.endswith(".") and t[0].isupper() and t.endswith(".") for s, t in zip(src, tgt))


def test_agreement_and_adjective_order():
    fem_pl = syn.noun_phrase(noun("voiture"), True, "def", adj("petit"), adj("blanc"))
    assert render(fem_pl.fr, fem_pl.en) == ("Les petites voitures blanches.", "The small white cars.")
    masc_sg = syn.noun_phrase(noun("chien"), False, "indef", None, adj("rouge"))
    assert render(masc_sg.fr, masc_sg.en) == ("Un chien rouge.", "A red dog.")


def test_verb_person_agreement_in_both_languages():
    v = verb("manger")
    apple = syn.noun_phrase(noun("pomme"), False, "indef")
    assert render(*syn.clause(("nous", "we"), v, apple)) == ("Nous mangeons une pomme.", "We eat an apple.")
    assert render(*syn.clause(("il", "he"), v, apple)) == ("Il mange une pomme.", "He eats an apple.")
    boys = syn.noun_phrase(noun("garçon"), True, "def")
    assert render(*syn.clause(boys, verb("regarder"), apple)) == (
        "Les garçons regardent une pomme.", "The boys watch an apple.")


def test_negation_and_object_pronouns():
    dog = syn.noun_phrase(noun("chien"), False, "def")
    assert render(*syn.clause(("il", "he"), verb("regarder"), dog, negative=True)) == (
        "Il ne regarde pas le chien.", "He does not watch the dog.")
    assert render(*syn.clause(("je", "I"), verb("regarder"), clitic=("la", "her"))) == (
        "Je la regarde.", "I watch her.")
    assert render(*syn.clause(("je", "I"), verb("regarder"), clitic=("la", "her"), negative=True)) == (
        "Je ne la regarde pas.", "I do not watch her.")
    assert render(*syn.clause(("ils", "they"), verb("aimer"), clitic=("me", "me"), negative=True)) == (
        "Ils ne m'aiment pas.", "They do not love me.")


def test_possessives_with_contractions():
    cat = syn.noun_phrase(noun("chat"), False, "def")
    woman = syn.noun_phrase(noun("femme"), False, "def")
    boys = syn.noun_phrase(noun("garçon"), True, "def")
    boy = syn.noun_phrase(noun("garçon"), False, "def")
    man = syn.noun_phrase(noun("homme"), False, "def")
    assert render(syn.possessive(cat, woman).fr, syn.possessive(cat, woman).en) == (
        "Le chat de la femme.", "The woman's cat.")
    assert render(syn.possessive(cat, boy).fr, syn.possessive(cat, boy).en) == ("Le chat du garçon.", "The boy's cat.")
    assert render(syn.possessive(cat, boys).fr, syn.possessive(cat, boys).en) == (
        "Le chat des garçons.", "The boys' cat.")
    assert render(syn.possessive(cat, man).fr, syn.possessive(cat, man).en) == (
        "Le chat de l'homme.", "The man's cat.")


def test_relative_clauses():
    boy = syn.noun_phrase(noun("garçon"), False, "def")
    apple = syn.noun_phrase(noun("pomme"), False, "indef")
    qui = syn.relative_qui(boy, verb("manger"), apple, animate=True)
    assert render(qui.fr, qui.en) == ("Le garçon qui mange une pomme.", "The boy who eats an apple.")
    the_apple = syn.noun_phrase(noun("pomme"), False, "def")
    que = syn.relative_que(the_apple, boy, verb("manger"))
    assert render(que.fr, que.en) == ("La pomme que le garçon mange.", "The apple that the boy eats.")
    man = syn.noun_phrase(noun("homme"), False, "def")
    que_elided = syn.relative_que(the_apple, man, verb("manger"))
    assert render(que_elided.fr, que_elided.en)[0] == "La pomme que l'homme mange."


def test_elision_rules():
    assert syn.elide_french(["je", "aime", "le", "arbre"]) == ["j'aime", "l'arbre"]
    assert syn.elide_french(["ce", "homme", "ma", "amie", "près", "de", "le", "parc"]) == [
        "cet", "homme", "mon", "amie", "près", "du", "parc"]
    assert syn.fix_english(["a", "apple", "a", "dog"]) == ["an", "apple", "a", "dog"]


def test_vocabulary_and_variety():
    src, tgt = syn.generate_pairs(20000, 3, 15, 3)
    words = {w.strip(".").lower() for s in src for w in s.split()}
    assert len(words) >= 300
    assert syn.VOCABULARY_SIZE >= 300
    mid, _ = syn.generate_pairs(5000, 8, 15, 4)
    assert len(set(mid)) >= 0.8 * len(mid)


def test_translation_is_a_function_of_the_source():
    src, tgt = syn.generate_pairs(20000, 2, 4, 9)
    seen: dict[str, str] = {}
    for s, t in zip(src, tgt):
        assert seen.setdefault(s, t) == t


@pytest.mark.parametrize("args", [(-1, 3, 5), (10, 6, 5), (10, 1, 5)])
def test_impossible_requests_are_data_errors(args):
    with pytest.raises(DataError):
        syn.generate_pairs(*args, seed=0)
