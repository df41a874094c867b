"""Word lists for the catalogue generator: ten departments modelled on Amazon's.

Each `Department` lists product types (search query, category sub-path, price range), the
attributes its products draw from (WebShop-style short phrases such as "sulfate free") and
its option types with their possible values.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ProductType:
    query: str
    subpath: str
    price: tuple[float, float]


@dataclass(frozen=True)
class Department:
    name: str
    path: str
    types: tuple[ProductType, ...]
    attributes: tuple[str, ...]
    options: dict[str, tuple[str, ...]]


def _types(*rows: tuple[str, str, float, float]) -> tuple[ProductType, ...]:
    return tuple(ProductType(q, s, (lo, hi)) for q, s, lo, hi in rows)


COLOURS = (
    "black", "white", "navy blue", "grey", "light grey", "red", "wine red", "pink", "beige",
    "brown", "olive green", "light blue", "royal blue", "purple", "yellow", "khaki", "ivory",
    "dark green", "orange", "multicolor",
)  # fmt: skip
CLOTHING_SIZES = ("x-small", "small", "medium", "large", "x-large", "xx-large", "3x-large")
SHOE_SIZES = (
    "6",
    "6.5",
    "7",
    "7.5",
    "8",
    "8.5",
    "9",
    "9.5",
    "10",
    "10.5",
    "11",
    "12",
    "8 wide",
    "9 wide",
)
PACKS = ("pack of 1", "pack of 2", "pack of 3", "pack of 4", "pack of 6", "pack of 12")

DEPARTMENTS: tuple[Department, ...] = (
    Department(
        "beauty", "Beauty & Personal Care",
        _types(
            ("shampoo", "Hair Care › Shampoo & Conditioner › Shampoos", 6, 38),
            ("face moisturizer", "Skin Care › Face › Creams & Moisturizers", 9, 60),
            ("lip balm", "Skin Care › Lip Care › Balms & Moisturizers", 3, 18),
            ("essential oil", "Fragrance › Aromatherapy › Essential Oils", 5, 35),
            ("nail polish", "Foot, Hand & Nail Care › Nail Art & Polish › Nail Polish", 4, 22),
            ("hair extensions", "Hair Care › Hair Extensions, Wigs & Accessories › Extensions", 15, 120),
        ),
        ("paraben free", "cruelty free", "sulfate free", "long lasting", "natural ingredients",
         "dry skin", "sensitive skin", "tea tree", "travel size", "easy to use", "vitamin e",
         "coconut oil", "non toxic", "fragrance free", "hair growth"),
        {"scent": ("lavender", "unscented", "rose", "coconut", "vanilla", "eucalyptus", "citrus"),
         "size": ("1 fl oz", "2 fl oz", "4 fl oz", "8 fl oz", "12 fl oz", "16 fl oz")},
    ),
    Department(
        "grocery", "Grocery & Gourmet Food",
        _types(
            ("herbal tea", "Beverages › Coffee, Tea & Cocoa › Tea › Herbal", 4, 30),
            ("protein bars", "Snacks & Sweets › Bars › Protein Bars", 10, 45),
            ("coffee beans", "Beverages › Coffee, Tea & Cocoa › Coffee › Whole Coffee Beans", 8, 40),
            ("dark chocolate", "Snacks & Sweets › Chocolate › Bars", 3, 30),
            ("beef jerky", "Meat & Seafood › Jerky & Dried Meats › Beef", 6, 40),
            ("olive oil", "Pantry Staples › Cooking & Baking › Oils › Olive", 7, 45),
        ),
        ("gluten free", "non gmo", "low sugar", "keto friendly", "high protein", "usda organic",
         "sugar free", "individually wrapped", "ready to eat", "low carb", "plant based",
         "caffeine free", "dairy free", "kosher certified", "resealable bag"),
        {"flavor name": ("original", "chocolate", "peanut butter", "vanilla", "sea salt",
                         "mint", "honey", "peppered", "french roast", "chamomile"),
         "size": ("2 ounce", "4 ounce", "8 ounce", "12 ounce", "16 ounce", "1 pound", "2 pound"),
         "count": PACKS},
    ),
    Department(
        "fashion", "Clothing, Shoes & Jewelry",
        _types(
            ("t-shirt", "Men › Clothing › Shirts › T-Shirts", 8, 35),
            ("hoodie", "Women › Clothing › Fashion Hoodies & Sweatshirts", 18, 60),
            ("jeans", "Men › Clothing › Jeans", 20, 80),
            ("maxi dress", "Women › Clothing › Dresses › Casual", 20, 70),
            ("yoga pants", "Women › Clothing › Active › Active Pants › Leggings", 12, 45),
            ("cardigan sweater", "Women › Clothing › Sweaters › Cardigans", 20, 65),
        ),
        ("machine wash", "slim fit", "long sleeve", "short sleeve", "cotton spandex",
         "button closure", "elastic waist", "high waist", "relaxed fit", "polyester spandex",
         "hand wash", "quality materials", "tummy control", "drawstring closure", "daily wear"),
        {"color": COLOURS, "size": CLOTHING_SIZES},
    ),
    Department(
        "shoes", "Clothing, Shoes & Jewelry",
        _types(
            ("running shoes", "Men › Shoes › Athletic › Running", 30, 140),
            ("sandals", "Women › Shoes › Sandals › Flat Sandals", 15, 60),
            ("ankle boots", "Women › Shoes › Boots › Ankle & Bootie", 30, 120),
            ("loafers", "Men › Shoes › Loafers & Slip-Ons", 25, 110),
            ("slippers", "Women › Shoes › Slippers", 10, 45),
            ("sneakers", "Women › Shoes › Fashion Sneakers", 25, 100),
        ),
        ("non slip", "rubber sole", "memory foam", "arch support", "lace up", "water resistant",
         "lightweight", "slip on", "ankle strap", "anti slip", "leather sole", "open toe",
         "faux fur", "breathable mesh", "steel toe"),
        {"color": COLOURS, "size": SHOE_SIZES},
    ),
    Department(
        "furniture", "Home & Kitchen › Furniture",
        _types(
            ("coffee table", "Living Room Furniture › Tables › Coffee Tables", 60, 400),
            ("office chair", "Home Office Furniture › Home Office Desk Chairs", 50, 350),
            ("bookshelf", "Living Room Furniture › Bookcases", 40, 300),
            ("bar stools", "Kitchen & Dining Room Furniture › Bar Stools", 45, 260),
            ("tv stand", "Living Room Furniture › TV & Media Furniture › Television Stands", 60, 380),
            ("nightstand", "Bedroom Furniture › Nightstands", 35, 220),
        ),
        ("solid wood", "easy assemble", "storage space", "living room", "metal legs",
         "height adjustable", "lumbar support", "engineered wood", "mid century",
         "space saving", "wood finish", "dining room", "assembly required", "steel frame",
         "contemporary design"),
        {"color": ("espresso", "walnut", "black", "white", "grey", "natural", "rustic brown", "oak"),
         "size": ("set of 1", "set of 2", "set of 4", "small", "large")},
    ),
    Department(
        "electronics", "Electronics",
        _types(
            ("bluetooth speaker", "Portable Audio & Video › Portable Speakers & Docks", 15, 150),
            ("wireless earbuds", "Headphones, Earbuds & Accessories › Earbud Headphones", 15, 180),
            ("usb c cable", "Computers & Accessories › Cables & Accessories › USB Cables", 5, 25),
            ("hdmi cable", "Television & Video › Accessories › Cables › HDMI Cables", 6, 30),
            ("phone case", "Cell Phones & Accessories › Cases, Holsters & Sleeves › Basic Cases", 6, 30),
            ("power bank", "Cell Phones & Accessories › Chargers & Power Adapters › Portable Power Banks", 15, 70),
        ),
        ("fast charging", "noise cancelling", "high definition", "water resistant",
         "long battery life", "easy carry", "plug and play", "high speed", "stereo sound",
         "wireless charging", "shockproof", "usb port", "aluminum alloy", "hands free",
         "heavy duty"),
        {"color": ("black", "white", "grey", "red", "navy blue", "rose gold", "silver", "green"),
         "size": ("3 ft", "6 ft", "10 ft", "1 ft", "15 ft"),
         "count": PACKS},
    ),
    Department(
        "home", "Home & Kitchen",
        _types(
            ("throw pillow covers", "Bedding › Decorative Pillows, Inserts & Covers › Throw Pillow Covers", 8, 35),
            ("bath towels", "Bath › Towels › Bath Towels", 12, 60),
            ("shower curtain", "Bath › Bathroom Accessories › Shower Curtains", 10, 40),
            ("coffee mug", "Kitchen & Dining › Dining & Entertaining › Cups, Mugs & Saucers › Mugs", 6, 30),
            ("cutting board", "Kitchen & Dining › Kitchen Utensils & Gadgets › Cutting Boards", 10, 50),
            ("storage baskets", "Storage & Organization › Baskets, Bins & Containers › Storage Baskets", 12, 55),
        ),
        ("machine washable", "dishwasher safe", "bpa free", "easy clean", "super soft",
         "eco friendly", "living room", "quick drying", "double sided", "microwave safe",
         "non slip", "high quality", "heavy duty", "hidden zipper", "stain resistant"),
        {"color": COLOURS, "size": ("18 x 18 inch", "20 x 20 inch", "12 x 20 inch", "72 x 72 inch",
                                    "11 oz", "15 oz", "small", "large")},
    ),
    Department(
        "sports", "Sports & Outdoors",
        _types(
            ("yoga mat", "Exercise & Fitness › Yoga › Mats", 15, 70),
            ("water bottle", "Outdoor Recreation › Camping & Hiking › Hydration › Water Bottles", 8, 40),
            ("resistance bands", "Exercise & Fitness › Strength Training › Resistance Bands", 8, 35),
            ("camping lantern", "Outdoor Recreation › Camping & Hiking › Lights & Lanterns", 10, 45),
            ("hiking backpack", "Outdoor Recreation › Camping & Hiking › Backpacks & Bags", 25, 120),
            ("dumbbells", "Exercise & Fitness › Strength Training › Dumbbells", 20, 150),
        ),
        ("non slip", "leak proof", "bpa free", "high density", "lightweight", "easy carry",
         "water resistant", "stainless steel", "double wall", "eco friendly", "carrying strap",
         "rechargeable battery", "adjustable straps", "anti tear", "vacuum insulated"),
        {"color": COLOURS, "size": ("12 oz", "18 oz", "24 oz", "32 oz", "40 oz", "1/4 inch",
                                    "1/2 inch", "5 lb", "10 lb", "20 lb")},
    ),
    Department(
        "pets", "Pet Supplies",
        _types(
            ("dog bed", "Dogs › Beds & Furniture › Beds", 20, 110),
            ("cat litter", "Cats › Litter & Housebreaking › Litter", 8, 40),
            ("dog leash", "Dogs › Collars, Harnesses & Leashes › Leashes", 8, 35),
            ("cat toys", "Cats › Toys › Balls", 5, 25),
            ("pet shampoo", "Dogs › Grooming › Shampoos & Conditioners", 7, 30),
            ("dog treats", "Dogs › Treats › Jerky", 6, 35),
        ),
        ("machine washable", "non slip", "odor control", "natural ingredients", "grain free",
         "easy clean", "heavy duty", "reflective stitching", "orthopedic foam", "made in usa",
         "interactive play", "clumping formula", "tear free", "small breed", "large breed"),
        {"color": ("black", "grey", "brown", "navy blue", "pink", "beige", "red"),
         "size": ("small", "medium", "large", "x-large", "10 pound", "20 pound", "5 foot", "6 foot")},
    ),
    Department(
        "health", "Health & Household",
        _types(
            ("electric toothbrush", "Oral Care › Toothbrushes & Accessories › Electric Toothbrushes", 20, 120),
            ("multivitamin", "Vitamins, Minerals & Supplements › Multivitamins", 8, 45),
            ("heating pad", "Health Care › Pain Relievers › Hot & Cold Therapies › Heating Pads", 15, 60),
            ("massage gun", "Wellness & Relaxation › Massage Tools & Equipment › Electric Massagers", 40, 200),
            ("hand sanitizer", "Health Care › First Aid › Antiseptics › Hand Sanitizers", 4, 25),
            ("face masks", "Health Care › Medical Supplies & Equipment › Face Masks", 5, 30),
        ),
        ("rechargeable battery", "auto shut off", "easy to use", "travel size", "non toxic",
         "gluten free", "vegan friendly", "high quality", "long lasting", "fast charging",
         "portable size", "hypoallergenic", "alcohol free", "individually wrapped", "soft bristles"),
        {"color": ("black", "white", "blue", "pink", "grey", "navy blue"),
         "size": ("30 count", "60 count", "120 count", "8 fl oz", "16 fl oz", "standard", "xl"),
         "count": PACKS},
    ),
)  # fmt: skip

BRAND_HEADS = ("lu", "ve", "ka", "zo", "mi", "ar", "te", "no", "sa", "qui", "bo", "fe", "ry", "da")
BRAND_TAILS = (
    "mora",
    "xio",
    "lux",
    "nova",
    "vita",
    "dale",
    "tex",
    "ric",
    "ona",
    "pex",
    "sky",
    "ward",
)
TITLE_LEADS = (
    "Premium",
    "Classic",
    "Deluxe",
    "Original",
    "Everyday",
    "Pro",
    "Essential",
    "Signature",
)
BENEFITS = (
    "designed for everyday use and built to last",
    "a thoughtful gift for family and friends",
    "backed by our 30-day satisfaction guarantee",
    "carefully tested for quality and safety",
    "made with attention to every detail",
    "loved by thousands of happy customers",
    "perfect for home, travel and the office",
)
REVIEW_LINES = (
    "works exactly as described", "great value for the price", "arrived quickly and well packed",
    "not what I expected", "would buy again", "quality could be better", "my family loves it",
)  # fmt: skip
