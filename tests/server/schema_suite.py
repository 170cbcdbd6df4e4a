"""Twenty response schemas of the kinds applications send (nested objects, arrays, enums, required and
optional fields, numbers with bounds, strings with patterns), as Pydantic models: the official
client's parse() turns each into a strict JSON schema, and the answer back into the model.

Free text and inner arrays carry a maxLength / maxItems (Text, conlist): the grammar allows any
length otherwise, and a 270M model at temperature 1 (or greedy, for a list of numbers) can go on
until max_tokens, which no grammar can prevent."""
from enum import Enum
from typing import Annotated, Literal, Optional

from pydantic import BaseModel, Field, conlist

Text = Annotated[str, Field(max_length=60)]


class Colour(str, Enum):
    red = "red"
    green = "green"
    blue = "blue"


class Person(BaseModel):
    name: Text
    age: int = Field(ge=0, le=130)


class Address(BaseModel):
    street: Text
    city: Text
    postcode: str = Field(pattern=r"^[0-9]{5}$")


class PersonWithAddress(BaseModel):
    person: Person
    address: Address


class Tags(BaseModel):
    tags: list[Text] = Field(max_length=4)


class Sentiment(BaseModel):
    label: Literal["positive", "negative", "neutral"]
    confidence: float = Field(ge=0.0, le=1.0)


class Paint(BaseModel):
    colour: Colour
    litres: int = Field(ge=1, le=20)


class Point(BaseModel):
    # Integers: a JSON number's digits cannot be bounded by a schema, and at temperature 1 the model
    # wrote "0.000..." past max_tokens once the prompt's logits moved in their last digits.
    x: int = Field(ge=-1000, le=1000)
    y: int = Field(ge=-1000, le=1000)


class Polygon(BaseModel):
    name: Text
    points: list[Point] = Field(min_length=3, max_length=5)


class Flags(BaseModel):
    enabled: bool
    verbose: bool
    retries: int = Field(ge=0, le=5)


class Event(BaseModel):
    title: Text
    date: str = Field(pattern=r"^20[0-9]{2}-[01][0-9]-[0-3][0-9]$")
    attendees: list[Person] = Field(max_length=3)


class Product(BaseModel):
    sku: str = Field(pattern=r"^[A-Z]{3}-[0-9]{4}$")
    price: float = Field(gt=0, lt=10000)
    in_stock: bool


class Order(BaseModel):
    order_id: int = Field(ge=1)
    items: list[Product] = Field(min_length=1, max_length=3)
    status: Literal["new", "paid", "shipped"]


class Recipe(BaseModel):
    title: Text
    servings: int = Field(ge=1, le=12)
    ingredients: list[Text] = Field(min_length=1, max_length=6)
    vegetarian: bool


class Weather(BaseModel):
    city: Text
    celsius: float = Field(ge=-60, le=60)
    condition: Literal["sunny", "cloudy", "rain", "snow"]


class Contact(BaseModel):
    email: str = Field(pattern=r"^[a-z]{1,12}@[a-z]{1,12}\.(com|org)$")
    phone: Optional[str] = Field(default=None, pattern=r"^\+[0-9]{6,12}$")


class Book(BaseModel):
    title: Text
    author: Person
    year: int = Field(ge=1450, le=2030)


class Library(BaseModel):
    books: list[Book] = Field(max_length=2)


class Matrix(BaseModel):
    rows: list[conlist(int, min_length=2, max_length=2)] = Field(min_length=2, max_length=2)


class Score(BaseModel):
    player: Text
    points: int = Field(ge=0, le=100)
    rank: Literal[1, 2, 3]


class Translation(BaseModel):
    source: Literal["en", "fr", "de"]
    target: Literal["en", "fr", "de"]
    text: Text


class Ticket(BaseModel):
    priority: Literal["low", "medium", "high"]
    summary: Text
    labels: list[Colour] = Field(max_length=3)
    assignee: Optional[Person] = None


SCHEMAS = [
    (Person, "Ada Lovelace, 36 years old."),
    (PersonWithAddress, "Bob lives at 1 Main Street, Springfield, postcode 12345; he is 40."),
    (Tags, "Tag this: fast cars and red bikes."),
    (Sentiment, "Review: I loved it!"),
    (Paint, "Two litres of blue paint."),
    (Polygon, "A triangle at (0,0), (1,0), (0,1)."),
    (Flags, "Enable it, quietly, with 3 retries."),
    (Event, "Team lunch on 2026-12-04 with Ada (36)."),
    (Product, "Widget ABC-1234 costs 9.99 and is in stock."),
    (Order, "Order 7: one widget ABC-1234 at 9.99, paid."),
    (Recipe, "Pancakes for 4: flour, eggs, milk. Vegetarian."),
    (Weather, "Oslo, 3 degrees, snowing."),
    (Contact, "Write to ada@mail.com."),
    (Book, "Frankenstein by Mary Shelley (20), 1818."),
    (Library, "Two books: Emma by Jane Austen (40), 1815."),
    (Matrix, "The 2x2 identity matrix."),
    (Score, "Alice won with 98 points."),
    (Translation, "Translate 'bonjour' from French to English."),
    (Ticket, "Urgent: the site is down, label red."),
    (Sentiment, "Review: it was fine, nothing special."),
]
